"""skills_list, skill_view and skill_manage: the skills a caller has, opened only when a
task needs them (the prompt names them), and written by the agent after a hard task so
the next one is easy. Owners write the shared skills; a user writes only their own.

A skill's scripts run through the terminal tool, so where that role's commands run; a
sandboxed command sees each skill its caller has, read-only, at the path skill_view names.
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs
import trio

from hermes.agent.skills.card import CARD, Card, SkillFormatError, parse_card, render_card
from hermes.agent.skills.library import SkillLibrary, SkillRefused, skill_path
from hermes.agent.tools.asking import lasting
from hermes.agent.tools.base import ToolContext, ToolError, capped, need, obj

ACTIONS = ("create", "edit", "patch", "add_file", "delete")


def library_of(ctx: ToolContext) -> SkillLibrary:
    if ctx.skills is None:
        raise ToolError("there are no skills here")
    return ctx.skills


@attrs.frozen
class SkillsListTool:
    name = "skills_list"
    description = "List the skills you have: name, description and the files each holds."
    parameters = obj([])

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        library = library_of(ctx)

        def listed() -> list[dict[str, Any]]:
            return [
                {
                    "name": s.name,
                    "description": s.card.description,
                    **({"yours": True} if s.own else {}),
                    "files": library.files(s.directory),
                }
                for s in library.available(ctx.caller)
            ]

        skills = await trio.to_thread.run_sync(listed)
        if not skills:
            return json.dumps({"skills": [], "note": "no skills yet"})
        return capped(json.dumps({"skills": skills}), ctx)


@attrs.frozen
class SkillViewTool:
    name = "skill_view"
    description = (
        "Open a skill: its SKILL.md instructions, or with path one of its files"
        " (references/..., scripts/...). Open a skill before doing a task it describes."
    )
    parameters = obj(
        ["name"],
        name={"type": "string"},
        path={"type": "string", "description": "a file of the skill, relative to it"},
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        name = str(need(args, "name"))
        path = args.get("path") or None
        return await trio.to_thread.run_sync(self._view, name, path, ctx)

    def _view(self, name: str, path: str | None, ctx: ToolContext) -> str:
        library = library_of(ctx)
        skill = library.find(ctx.caller, name)
        data = library.read(skill, path)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return (
                f"{path} of the skill {name} is a binary file ({len(data)} bytes) at"
                f" {skill_path(skill.directory, path)}; use it from a command"
            )
        if path in (None, CARD):
            files = [f for f in library.files(skill.directory) if f != CARD]
            head = f"# skill {name} (at {skill.directory})"
            if files:
                head += f"\nits files: {', '.join(files)}; scripts run with the terminal tool"
            return capped(f"{head}\n\n{text}", ctx)
        return capped(text, ctx)


@attrs.frozen
class SkillManageTool:
    name = "skill_manage"
    description = (
        "Save what you learned as a skill, or change one: action create (name, description,"
        " content: the instructions), edit (content: the whole new SKILL.md), patch (section:"
        " a heading, content: its new text), add_file (path under scripts/, references/ or"
        " assets/, content), delete. Names: lowercase letters, digits, hyphens."
    )
    parameters = obj(
        ["action", "name"],
        action={"type": "string", "enum": list(ACTIONS)},
        name={"type": "string"},
        description={"type": "string"},
        content={"type": "string"},
        section={"type": "string"},
        path={"type": "string"},
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        action, name = str(need(args, "action")), str(need(args, "name"))
        if action not in ACTIONS:
            raise ToolError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
        library = library_of(ctx)
        said = " · ".join(
            f"{k}: {args[k]}" for k in ("path", "section", "description", "content") if args.get(k)
        )
        refused = await lasting(ctx, "a skill", f"skill_manage {action} {name} · {said}")
        if refused is not None:
            return refused
        act = getattr(self, f"_{action}")
        try:
            return await trio.to_thread.run_sync(act, library, name, args, ctx)
        except SkillFormatError as exc:
            raise ToolError(str(exc)) from None

    def _create(
        self, library: SkillLibrary, name: str, args: dict[str, Any], ctx: ToolContext
    ) -> str:
        directory = library.new_directory(ctx.caller, name)
        card = Card(name, " ".join(str(need(args, "description")).split()))
        text = render_card(card, str(need(args, "content")))
        parse_card(text, name)  # the description's bounds
        library.write(directory, None, text.encode())
        whose = "shared" if ctx.caller.is_owner else "yours"
        return f"created the skill {name} ({whose}) at {directory}"

    def _edit(
        self, library: SkillLibrary, name: str, args: dict[str, Any], ctx: ToolContext
    ) -> str:
        skill = library.writable(ctx.caller, name)
        text = str(need(args, "content"))
        parse_card(text, name)
        library.write(skill.directory, None, text.encode())
        return f"rewrote {CARD} of {name}"

    def _patch(
        self, library: SkillLibrary, name: str, args: dict[str, Any], ctx: ToolContext
    ) -> str:
        skill = library.writable(ctx.caller, name)
        heading = str(need(args, "section")).strip().lstrip("#").strip()
        content = str(args.get("content") or "").strip("\n")
        text = library.read(skill).decode("utf-8")
        patched, how = replace_section(text, heading, content)
        parse_card(patched, name)
        library.write(skill.directory, None, patched.encode())
        return f"{how} the section {heading!r} of {name}"

    def _add_file(
        self, library: SkillLibrary, name: str, args: dict[str, Any], ctx: ToolContext
    ) -> str:
        skill = library.writable(ctx.caller, name)
        path = str(need(args, "path"))
        if path.split("/", 1)[0] not in ("scripts", "references", "assets") or "/" not in path:
            raise SkillRefused(f"{path}: a skill's files go under scripts/, references/ or assets/")
        data = str(args.get("content") or "").encode()
        library.write(skill.directory, path, data)  # within FILE_BYTES, or refused
        return f"wrote {path} of {name} ({len(data)} bytes)"

    def _delete(
        self, library: SkillLibrary, name: str, args: dict[str, Any], ctx: ToolContext
    ) -> str:
        skill = library.writable(ctx.caller, name)
        library.remove(skill)
        return f"deleted the skill {name}"


HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def replace_section(text: str, heading: str, content: str) -> tuple[str, str]:
    """`text` with the body of its Markdown section `heading` (up to the next heading of
    the same or a higher level) replaced by `content`, or the section added at the end;
    and which of the two was done."""
    headings = [h for h in HEADING.finditer(text) if not _in_code(text, h.start())]
    for i, found in enumerate(headings):
        if found.group(2).strip().lower() != heading.lower():
            continue
        level = len(found.group(1))
        end = next((h.start() for h in headings[i + 1 :] if len(h.group(1)) <= level), len(text))
        body = f"\n\n{content}\n\n" if content else "\n\n"
        return text[: found.end()] + body + text[end:].lstrip("\n"), "replaced"
    return f"{text.rstrip()}\n\n## {heading}\n\n{content}\n", "added"


FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)


def _in_code(text: str, at: int) -> bool:
    """Whether offset `at` of Markdown `text` lies inside a fenced code block (where a
    `# comment` line is no heading)."""
    return len(FENCE.findall(text, 0, at)) % 2 == 1
