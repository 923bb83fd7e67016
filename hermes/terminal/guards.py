"""What a command may not do: hard blocks, patterns that need approval, and
foreground commands that would never end."""

from __future__ import annotations

import re

import attrs

_SYSTEM_DIRS = (
    r"(?:/|/\*|~|~/|~/\*|\$HOME/?"
    r"|/(?:bin|boot|dev|etc|home|lib|lib64|opt|proc|root|sbin|srv|sys|usr|var)/?\*?)"
)
_RM_FLAGS = (
    r"(?:-[a-zA-Z]*[rR][a-zA-Z]*(?:\s+-[a-zA-Z]+)?"
    r"|-[a-zA-Z]*[fF][a-zA-Z]*\s+-[a-zA-Z]*[rR][a-zA-Z]*"
    r"|--recursive(?:\s+--force)?|--force\s+--recursive)"
)

HARD_BLOCKS: list[tuple[str, re.Pattern[str]]] = [
    (
        "recursive rm of /, home or a system directory",
        re.compile(
            rf"\brm\s+(?:--no-preserve-root\s+)?{_RM_FLAGS}\s+(?:--no-preserve-root\s+)?{_SYSTEM_DIRS}(?:\s|$|;|&|\|)"
        ),
    ),
    ("making a filesystem", re.compile(r"\bmkfs(?:\.\w+)?\b")),
    (
        "dd onto a raw disk",
        re.compile(r"\bdd\b[^\n;|&]*\bof=/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)\w*"),
    ),
    ("writing onto a raw disk", re.compile(r">\s*/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)\w*")),
    ("a fork bomb", re.compile(r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:")),
    ("kill -1 (every process)", re.compile(r"\bkill\s+(?:-(?:9|KILL|TERM|s\s+\w+)\s+)?-1\b")),
    (
        "shutting down or rebooting the machine",
        re.compile(
            r"(?:^|[;&|]\s*|\bsudo\s+)(?:shutdown|reboot|halt|poweroff)\b|\binit\s+[06]\b|\bsystemctl\s+(?:poweroff|reboot|halt)\b"
        ),
    ),
]

NEEDS_APPROVAL: list[tuple[str, re.Pattern[str]]] = [
    (
        "piping a download into a shell",
        re.compile(r"\b(?:curl|wget)\b[^\n;]*\|\s*(?:sudo\s+)?(?:ba|z|da)?sh\b"),
    ),
    (
        "recursive chmod or chown of a system path",
        re.compile(
            r"\bch(?:mod|own)\s+(?:-[a-zA-Z]*R[a-zA-Z]*|--recursive)\b[^\n;|&]*\s/(?:bin|boot|etc|lib|lib64|opt|root|sbin|usr|var)?(?:/|\s|$)"
        ),
    ),
    ("running as root with sudo", re.compile(r"(?:^|[;&|]\s*)sudo\b")),
    ("force-pushing over history", re.compile(r"\bgit\s+push\b[^\n;|&]*(?:--force\b|\s-f\b)")),
    ("dropping a database", re.compile(r"\bDROP\s+(?:DATABASE|TABLE)\b", re.IGNORECASE)),
]

NEVER_ENDING: list[tuple[str, re.Pattern[str]]] = [
    ("it starts a process in the background with &", re.compile(r"(?<![&>])&\s*(?:$|;|\n)")),
    ("it uses nohup", re.compile(r"\bnohup\b")),
    ("it follows a file forever", re.compile(r"\btail\s+(?:-[a-zA-Z]*f|--follow)\b")),
    ("it repeats forever", re.compile(r"\bwatch\s+\S|\bwhile\s+(?:true|:)\s*;\s*do\b")),
    (
        "it starts a development server",
        re.compile(
            r"\b(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:dev|start|serve)\b|\bvite\b(?!\s+build)"
            r"|\bpython3?\s+-m\s+http\.server\b|\bflask\s+run\b|\buvicorn\b|\bgunicorn\b"
            r"|\bmanage\.py\s+runserver\b|\brails\s+s(?:erver)?\b|\bjupyter\s+(?:notebook|lab)\b"
            r"|\bdocker(?:-|\s+)compose\s+up\b(?![^\n;|&]*\s-d\b)"
        ),
    ),
]


@attrs.frozen
class Verdict:
    """allow, block, approve (needs a human yes), or background (refused in the foreground)."""

    action: str
    reason: str = ""


ALLOW = Verdict("allow")


def judge(command: str, background: bool = False, approved: bool = False) -> Verdict:
    for reason, pattern in HARD_BLOCKS:
        if pattern.search(command):
            return Verdict("block", reason)
    if not approved:
        for reason, pattern in NEEDS_APPROVAL:
            if pattern.search(command):
                return Verdict("approve", reason)
    if not background:
        for reason, pattern in NEVER_ENDING:
            if pattern.search(command):
                return Verdict("background", reason)
    return ALLOW
