"""A page as the model reads it: Chromium's accessibility tree as an indented text tree,
each element one can act on named by a short reference (`[e12] link "Next"`).

Built from `Accessibility.getFullAXTree`'s nodes, without Chromium: ignored nodes and
nameless generic containers give their place to their children, a text that only repeats
its parent's name is left out, and every node that stands for a DOM element gets a
reference, which `Refs` maps back to the element (its backend node id) for a click.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

SKIPPED_ROLES = frozenset({"InlineTextBox", "LineBreak"})
PLAIN_ROLES = frozenset({"generic", "none", "presentation", "group", "Section", "paragraph", "div"})
TEXT_ROLES = frozenset({"StaticText", "text"})
VALUE_ROLES = frozenset({"textbox", "searchbox", "combobox", "spinbutton", "slider", "TextField"})
STATES = ("checked", "selected", "expanded", "disabled", "required", "focused")
NAME_CHARS = 200  # of one node's name or value
DEPTH_LIMIT = 60


@attrs.define
class Refs:
    """The references of the latest snapshot: `e1`, `e2`, ... to backend node ids."""

    nodes: dict[str, int] = attrs.Factory(dict)

    def node(self, ref: str) -> int | None:
        return self.nodes.get(ref.strip().strip("[]"))


def _value(field: dict[str, Any] | None) -> str:
    if not field:
        return ""
    value = field.get("value")
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= NAME_CHARS else text[: NAME_CHARS - 1] + "…"


def render(nodes: Iterable[dict[str, Any]]) -> tuple[str, Refs]:
    """The tree of `nodes` (getFullAXTree's) as text, and its references."""
    by_id: dict[str, dict[str, Any]] = {}
    children_of: set[str] = set()
    for node in nodes:
        by_id[str(node["nodeId"])] = node
        children_of.update(str(c) for c in node.get("childIds", ()))
    roots = [n for i, n in by_id.items() if i not in children_of]
    refs = Refs()
    lines: list[str] = []

    def walk(node: dict[str, Any], depth: int, parent_name: str) -> None:
        if depth > DEPTH_LIMIT:
            return
        role = _value(node.get("role"))
        name = _clip(_value(node.get("name")))
        children = [by_id[str(c)] for c in node.get("childIds", ()) if str(c) in by_id]
        if role in SKIPPED_ROLES:
            return
        shown = not node.get("ignored") and not (role in PLAIN_ROLES and not name)
        if role in TEXT_ROLES:
            if name and name != parent_name:
                lines.append(f"{'  ' * depth}text {_quoted(name)}")
            return
        if role == "RootWebArea":
            shown = False
            if name:
                lines.append(f"page {_quoted(name)}")
        if shown:
            lines.append("  " * depth + _line(node, role, name, refs))
            depth += 1
        for child in children:
            walk(child, depth, name if shown else parent_name)

    for root in roots:
        walk(root, 0, "")
    return "\n".join(lines), refs


def _quoted(text: str) -> str:
    return '"' + text.replace('"', "'") + '"'


def _line(node: dict[str, Any], role: str, name: str, refs: Refs) -> str:
    parts = []
    backend = node.get("backendDOMNodeId")
    if isinstance(backend, int):
        ref = f"e{len(refs.nodes) + 1}"
        refs.nodes[ref] = backend
        parts.append(f"[{ref}]")
    parts.append(role or "node")
    if name:
        parts.append(_quoted(name))
    value = _clip(_value(node.get("value")))
    if value and role in VALUE_ROLES:
        parts.append(f"value={_quoted(value)}")
    for prop in node.get("properties", ()):
        if prop.get("name") in STATES and _value(prop.get("value")) not in ("", "false"):
            state = prop["name"]
            said = _value(prop.get("value"))
            parts.append(state if said == "true" else f"{state}={said}")
    return " ".join(parts)
