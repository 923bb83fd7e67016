"""`hermes chat` (a REPL, or one shot with -m) and `hermes status`: clients of serve."""

from __future__ import annotations

import argparse
import sys

import trio

from hermes.actors.snapshot import Snapshot
from hermes.adapters.registry import SECTIONS
from hermes.cli import exit_codes
from hermes.cli.client import ask_serve, connect, serve_address
from hermes.config import load_config
from hermes.gateway.settings import Config
from hermes.home import HermesHome
from hermes.operations.context import NoArgs


def register(chat: argparse.ArgumentParser) -> None:
    """`hermes chat`'s arguments, on the parser hermes.cli.main made for it."""
    chat.add_argument("-m", "--message", help="send one message, print the reply, exit")
    chat.add_argument("--session", help="continue this session")
    chat.add_argument("--port", type=int, help="the endpoint's port (default: serve's)")
    chat.set_defaults(func=chat_main)


def register_status(status: argparse.ArgumentParser) -> None:
    """`hermes status`'s arguments."""
    status.add_argument("--port", type=int)
    status.set_defaults(func=status_main)


def _target(args: argparse.Namespace) -> tuple[str, str]:
    home = HermesHome.from_env()
    return serve_address(home, load_config(home.config_path, Config, SECTIONS), args.port)


class _Shown:
    """Prints what the endpoint pushes, as it comes: a turn's steps, and a message serve
    sends unasked (a cron brief) even while the REPL waits for the user's next line;
    remembers whether the current reply's text streamed."""

    def __init__(self, prompt: str | None) -> None:
        self.streamed = False
        self.prompt = prompt  # shown again after a push lands on an idle REPL's prompt
        self.idle = False

    def __call__(self, note: dict) -> None:
        params = note.get("params", {})
        method = note.get("method")
        if method == "turn.event":
            if params["kind"] == "text":
                self.streamed = True
                print(params["text"], end="", flush=True)
            elif params["kind"] == "tool_call":
                print(f"\n[{params['tool']} {params['text']}]", flush=True)
            elif params["kind"] == "tool_result" and params.get("note"):
                print(f"[{params['tool']}: {params['note']}]", flush=True)
        elif method == "chat.message":
            label = "[cron] " if params.get("kind") == "cron" else ""
            print(f"\n{label}{params['text']}", flush=True)
            if self.idle and self.prompt:
                print(self.prompt, end="", flush=True)


PROMPT = "you> "


async def _chat(url: str, token: str, args: argparse.Namespace) -> int:
    lines = [args.message] if args.message is not None else None
    shown = _Shown(PROMPT if lines is None else None)
    async with connect(url, token, shown) as rpc:
        session = args.session
        while True:
            if lines is not None:
                if not lines:
                    return exit_codes.OK
                text = lines.pop()
            else:
                shown.idle = True
                try:  # a thread of its own: pushes are printed meanwhile
                    text = await trio.to_thread.run_sync(input, PROMPT, abandon_on_cancel=True)
                except EOFError:
                    return exit_codes.OK
                finally:
                    shown.idle = False
            if not text.strip():
                continue
            shown.streamed = False
            result = await rpc.call("chat.send", {"text": text, "session": session})
            session = result["session"]
            failed = result["status"] != "done"
            if failed:
                print(f"\n[{result['status']}] {result['text']}", file=sys.stderr)
            elif shown.streamed:
                print()
            else:  # a command's answer, or a reply that did not stream
                print(result["text"])
            if lines is None:
                print(f"(session {session})", file=sys.stderr)
            elif failed:  # one shot: the exit status says the turn did not finish
                return exit_codes.FAILED


def chat_main(args: argparse.Namespace) -> int:
    url, token = _target(args)
    return trio.run(_chat, url, token, args)


def status_main(args: argparse.Namespace) -> int:
    home = HermesHome.from_env()
    config = load_config(home.config_path, Config, SECTIONS)
    tree: Snapshot = trio.run(ask_serve, home, config, "status", NoArgs(), args.port)
    print(tree.render())
    return exit_codes.OK
