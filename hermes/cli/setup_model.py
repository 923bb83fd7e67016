"""`hermes setup`'s model questions: the provider, its base URL, its model and key, tried
with one real request before anything is saved. Skipping keeps the offline model."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import trio

from hermes.actors.errors import HermesError, Invalid
from hermes.cli.setup_ask import Asker
from hermes.config import ConfigError, Secrets, structure

TRY_TIMEOUT = 60.0  # seconds the model gets to answer the trial request
OFFLINE = "offline"
COMPATIBLE = "compatible"


class ModelRefused(Invalid):
    """The model's endpoint did not answer the trial request (--non-interactive)."""


def register(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("the model")
    group.add_argument(
        "--model-provider",
        metavar="NAME",
        help="`offline` (the built-in model, the default) or a name for an"
        " OpenAI-compatible endpoint (openai, openrouter, ...)",
    )
    group.add_argument("--model-base-url", metavar="URL", help="the endpoint's base URL")
    group.add_argument("--model-name", metavar="MODEL", help="the model, as the provider names it")
    group.add_argument(
        "--model-key-env",
        metavar="VAR",
        help="the environment variable holding the API key (copied to HERMES_HOME/.env)",
    )
    group.add_argument(
        "--model-key-file", metavar="PATH", help="a file holding the API key (its first line)"
    )


def read_secret(env: str | None, file: str | None, env_flag: str, file_flag: str) -> str | None:
    """A secret given by flag: from the variable `env` names, or the file `file`; never
    from the command line itself (it would show in `ps` and shell history)."""
    if env is not None:
        value = os.environ.get(env)
        if not value:
            raise Invalid(f"{env_flag}: the variable {env} is not set")
        return value
    if file is not None:
        try:
            lines = Path(file).expanduser().read_text().splitlines()
        except OSError as exc:
            raise Invalid(f"{file_flag}: cannot read {file}: {exc.strerror}") from None
        if not lines or not lines[0].strip():
            raise Invalid(f"{file_flag}: {file} is empty")
        return lines[0].strip()
    return None


def ask_model(
    asker: Asker, args: argparse.Namespace, current: dict[str, Any]
) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The `model` section (None: the offline model) and the secrets it names."""
    kind = asker.choose(
        "Which model answers?",
        "--model-provider",
        None if args.model_provider is None else _kind(args.model_provider),
        [
            (OFFLINE, "the built-in offline model (no network; change it later)"),
            (COMPATIBLE, "an OpenAI-compatible endpoint (OpenAI, OpenRouter, Ollama, ...)"),
        ],
        COMPATIBLE if current.get("provider", OFFLINE) != OFFLINE else OFFLINE,
    )
    if kind == OFFLINE:
        return None, {}
    given = args.model_provider if args.model_provider not in (None, COMPATIBLE) else None
    provider = asker.text(
        "A name for the provider:", "--model-provider", given, current.get("provider", "openai")
    )
    url = asker.text(
        "Its base URL:",
        "--model-base-url",
        args.model_base_url,
        current.get("base_url") or "https://api.openai.com/v1",
        _url_problem,
    )
    model = asker.text("The model:", "--model-name", args.model_name, current.get("model"))
    var = args.model_key_env or f"{_variable(provider)}_API_KEY"
    key = read_secret(
        args.model_key_env, args.model_key_file, "--model-key-env", "--model-key-file"
    )
    while True:
        if key is None:
            key = asker.secret(
                f"Its API key (hidden; saved in .env as {var}; empty: none):",
                "--model-key-env",
                allow_empty=True,
            )
        section = {"provider": provider, "model": model, "base_url": url}
        if key:
            section["api_key_env"] = var
        problem = trio.run(try_model, section, {var: key} if key else {})
        if problem is None:
            asker.say(f"  the model answered: {provider} {model} works")
            return section, ({var: key} if key else {})
        if not asker.interactive:
            raise ModelRefused(f"the model did not answer: {problem}")
        asker.say(f"  the model did not answer: {problem}")
        url = asker.text("Its base URL:", "--model-base-url", None, url, _url_problem)
        key = None


async def try_model(section: dict[str, Any], secrets: dict[str, str]) -> str | None:
    """One real request to the model `section` describes: None if it answered, else
    what went wrong (the key never in it)."""
    from hermes.agent.providers import build_provider
    from hermes.agent.settings import ModelConfig

    entry = structure(section, ModelConfig)
    try:
        provider = build_provider(entry, Secrets(secrets, frozenset()))
        try:
            with trio.fail_after(TRY_TIMEOUT):
                await provider.complete([{"role": "user", "content": "Say: ready"}], [], None)
        finally:
            aclose = getattr(provider, "aclose", None)
            if aclose is not None:
                await aclose()
    except trio.TooSlowError:
        return f"no answer within {TRY_TIMEOUT:g} s"
    except (HermesError, ConfigError) as exc:
        text = str(exc)
        for value in secrets.values():
            text = text.replace(value, "***")
        return text[:300]
    return None


def _kind(provider: str) -> str:
    return OFFLINE if provider == OFFLINE else COMPATIBLE


def _variable(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).upper() or "MODEL"


def _url_problem(url: str) -> str | None:
    return None if url.startswith(("http://", "https://")) else "an http:// or https:// URL"
