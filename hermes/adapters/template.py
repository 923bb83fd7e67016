"""A prompt made from an event's JSON: text with `{dotted.path}` fields read from its body
(an inbound webhook's delivery, a Home Assistant event).

Not Python's `format()`, which reaches attributes and indexes of the objects it is
given: here a field is a path of keys (and list indexes, `{commits.0.id}`) walked
through parsed JSON only. A field the body does not have renders as a marker naming
it, never an error; a value that is an object or a list renders as compact JSON; each
value, and the whole prompt, is capped. `{{` and `}}` are braces. A template is read
once, when config is loaded, so a bad one is refused there, naming its route.
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

FIELD = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")
TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
VALUE_CHARS = 4000  # the longest a single field renders, in characters


class TemplateError(ValueError):
    """A prompt template that cannot be read: a stray brace, or a field that is no path."""


def missing(path: str) -> str:
    """What a field the body does not have renders as."""
    return f"[no {path}]"


@attrs.frozen
class Template:
    """A prompt template, read: literal text and fields (each a path of keys)."""

    parts: tuple[str | tuple[str, ...], ...]

    @classmethod
    def read(cls, text: str) -> Template:
        """`text` as a template; TemplateError naming what is wrong and where."""
        parts: list[str | tuple[str, ...]] = []
        at = 0
        for token in TOKEN.finditer(text):
            parts.append(text[at : token.start()])
            at = token.end()
            word = token.group(0)
            if word in ("{{", "}}"):
                parts.append(word[0])
            elif token.group(1) is not None and FIELD.fullmatch(token.group(1).strip()):
                parts.append(tuple(token.group(1).strip().split(".")))
            elif token.group(1) is not None:
                raise TemplateError(
                    f"{word!r} at character {token.start()} is not a field: write a path of"
                    " keys such as {repository.full_name} or {commits.0.id}"
                )
            else:
                raise TemplateError(
                    f"a lone {word!r} at character {token.start()}: write {word * 2} for a brace"
                )
        parts.append(text[at:])
        return cls(tuple(p for p in parts if p != ""))

    @property
    def fields(self) -> list[str]:
        """The paths the template reads, as written."""
        return [".".join(p) for p in self.parts if isinstance(p, tuple)]

    def render(self, body: Any, cap: int) -> str:
        """The prompt for `body` (parsed JSON), at most `cap` characters."""
        text = "".join(part if isinstance(part, str) else _value(body, part) for part in self.parts)
        return _capped(text, cap)


def _value(body: Any, path: tuple[str, ...]) -> str:
    found = body
    for key in path:
        if isinstance(found, dict) and key in found:
            found = found[key]
        elif isinstance(found, list) and key.isdigit() and int(key) < len(found):
            found = found[int(key)]
        else:
            return missing(".".join(path))
    if isinstance(found, str):
        text = found
    else:
        text = json.dumps(found, ensure_ascii=False, separators=(",", ":"))
    return _capped(text, VALUE_CHARS)


def _capped(text: str, cap: int) -> str:
    if len(text) <= cap:
        return text
    note = f" [... cut at {cap} characters]"
    return text[: max(0, cap - len(note))] + note
