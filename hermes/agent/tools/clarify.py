"""clarify: ask the user a short question, with up to four choices, instead of guessing.
The turn waits for the answer as it waits for an approval (hermes.gateway.questions);
offered only where a turn has someone to ask (never in a cron fire, nor a subagent)."""

from __future__ import annotations

from typing import Any

import attrs

from hermes.agent.tools.base import ToolContext, ToolError, need, obj

MAX_CHOICES = 4
MAX_QUESTION, MAX_CHOICE = 500, 60  # characters


@attrs.frozen
class ClarifyTool:
    name = "clarify"
    description = (
        "Ask the user a short question when you cannot go on well without their answer (a"
        " choice between ways, a missing detail), with up to four choices shown as buttons;"
        " they may answer in their own words too. The turn waits for the answer."
    )
    parameters = obj(
        ["question"],
        question={"type": "string"},
        choices={"type": "array", "items": {"type": "string"}, "maxItems": MAX_CHOICES},
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        question = " ".join(str(need(args, "question")).split())
        choices = args.get("choices") or []
        if not isinstance(choices, list) or len(choices) > MAX_CHOICES:
            raise ToolError(f"choices: a list of at most {MAX_CHOICES}")
        choices = tuple(" ".join(str(c).split()) for c in choices)
        if len(question) > MAX_QUESTION or any(not c or len(c) > MAX_CHOICE for c in choices):
            raise ToolError(
                f"a question is at most {MAX_QUESTION} characters and a choice 1 to {MAX_CHOICE}"
            )
        if ctx.asker is None:
            raise ToolError("there is nobody to ask in this turn")
        return await ctx.asker.ask(ctx, question, choices)
