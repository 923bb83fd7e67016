"""Where a turn's context came from: text from outside an owner's hands marks it.

Text an owner did not write can carry instructions the model may follow: a web page, a
search result, an MCP server's answer, a message or file from anyone but an owner, a
mail's body (which quotes others). Each stored message carries why it is such text
(`messages.untrusted`), a compaction's summary written from such text carries it on, and a
turn whose conversation holds any of it, or that reads some, is marked: its later
commands run where `terminal.after_untrusted` says (hermes.terminal.placement). The mark
is where the text came from, never what a command says; `/new` starts a conversation
without it.
"""

from __future__ import annotations

import attrs

from hermes.adapters.media import Saved


@attrs.define(eq=False)
class TurnMarks:
    """Why the turn's context holds untrusted text (None: it holds none)."""

    untrusted: str | None = None

    def took_in(self, why: str) -> None:
        if self.untrusted is None:
            self.untrusted = why


@attrs.define(eq=False)
class CallMarks:
    """What one tool call did that its record and its tool line show: the untrusted text it
        brought into the turn (why), a note for its tool line (where a command ran), and the
    images it shows the model (hermes.agent.loop adds them after the call's answer)."""

    turn: TurnMarks
    untrusted: str | None = None
    note: str = ""
    shown: list[Saved] = attrs.Factory(list)  # images it shows the model (a screenshot)

    def took_in(self, why: str) -> None:
        if self.untrusted is None:
            self.untrusted = why
        self.turn.took_in(why)


def of_sender(role: str, platform: str, user_id: str) -> str | None:
    """Why a message is untrusted by who sent it: anyone but an owner."""
    return None if role == "owner" else f"a message from {platform} user {user_id}"
