"""The questions of `hermes setup`: asked in the terminal (questionary), or answered by
their flags.

Every question names its flag. A flag given answers its question without asking; with
`--non-interactive` nothing is asked, and a question with no flag given and no default
stops the wizard with MissingFlag naming the flag. Secrets are asked hidden and never
printed back. questionary (on prompt_toolkit) is imported here, and this module only
by the setup command: `hermes --help` loads neither.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from hermes.actors.errors import Invalid


class MissingFlag(Invalid):
    """`--non-interactive`, and a question without a default was not answered by its
    flag."""

    def __init__(self, flag: str, question: str) -> None:
        super().__init__(f"{flag} is missing ({question}); --non-interactive asks nothing")
        self.flag = flag


class Cancelled(Invalid):
    """The user stopped the wizard at a question (Ctrl-C, Ctrl-D)."""


Check = Callable[[str], str | None]  # an answer's problem, or None when it will do


@attrs.define
class Asker:
    """Asks in the terminal, unless the flag answered or `interactive` is off."""

    interactive: bool
    say: Callable[[str], None] = print

    def text(
        self,
        question: str,
        flag: str,
        given: str | None,
        default: str | None = None,
        check: Check | None = None,
    ) -> str:
        """A line of text; `default` is taken on Enter (and without a terminal)."""
        if given is not None:
            problem = check(given) if check else None
            if problem:
                raise Invalid(f"{flag}: {problem}")
            return given
        if not self.interactive:
            if default is None:
                raise MissingFlag(flag, question)
            return default
        import questionary

        def valid(answer: str) -> bool | str:
            if not answer and default is None:
                return "an answer is needed"
            return (check(answer) if check and answer else None) or True

        answer = _asked(questionary.text(question, default=default or "", validate=valid))
        return answer or default or ""

    def secret(self, question: str, flag: str, allow_empty: bool = False) -> str:
        """A secret typed hidden (the flag that answers it reads it from elsewhere: the
        caller asks only when the flag was not given)."""
        if not self.interactive:
            if allow_empty:
                return ""
            raise MissingFlag(flag, question)
        import questionary

        def valid(answer: str) -> bool | str:
            return True if answer or allow_empty else "an answer is needed"

        return _asked(questionary.password(question, validate=valid)).strip()

    def choose(
        self,
        question: str,
        flag: str,
        given: str | None,
        choices: Sequence[tuple[str, str]],
        default: str,
    ) -> str:
        """One of `choices` (value, what it says)."""
        values = [value for value, _ in choices]
        if given is not None:
            if given not in values:
                raise Invalid(f"{flag}: {given!r} is not one of {', '.join(values)}")
            return given
        if not self.interactive:
            return default
        import questionary

        options = [questionary.Choice(said, value) for value, said in choices]
        return _asked(questionary.select(question, options, default=_of(options, default)))

    def choose_many(
        self,
        question: str,
        flag: str,
        given: Sequence[str] | None,
        choices: Sequence[tuple[str, str]],
    ) -> list[str]:
        """Any of `choices` (none with nothing picked)."""
        values = [value for value, _ in choices]
        if given is not None:
            unknown = [g for g in given if g not in values]
            if unknown:
                raise Invalid(f"{flag}: {', '.join(unknown)}: not one of {', '.join(values)}")
            return list(dict.fromkeys(given))
        if not self.interactive:
            return []
        import questionary

        options = [questionary.Choice(said, value) for value, said in choices]
        return list(_asked(questionary.checkbox(question, options)))

    def confirm(self, question: str, flag: str, given: bool | None, default: bool) -> bool:
        if given is not None:
            return given
        if not self.interactive:
            return default
        import questionary

        return bool(_asked(questionary.confirm(question, default=default)))


def _of(options: list[Any], value: str) -> Any:
    return next((o for o in options if o.value == value), None)


def _asked(question: Any) -> Any:
    """The answer; Cancelled when the user stopped (Ctrl-C or Ctrl-D)."""
    try:
        return question.unsafe_ask()
    except (KeyboardInterrupt, EOFError):
        raise Cancelled("setup stopped at a question; what was confirmed so far is kept") from None
