"""The content scan: text from outside an owner's hands, read before it enters a context.

An installed skill's files (SKILL.md, its references, its scripts) and a project's
AGENTS.md are written by someone else and go into the agent's context, where the model
may follow them. Each is read here for what an owner should see before that happens:
hidden characters, lines that try to change the agent's rules, lines that reach for
secrets, downloads run as programs, paths that leave the tree. The findings are shown to
the owner, never silently fixed; an AGENTS.md is loaded without its offending lines
(`without_findings`).

It is a pattern match, not a boundary: it catches the plain attempts and shows them, and
misses what is phrased around it. Everything here is pure and synchronous (callers run it
in a thread), and its work is capped: a line is read on its first `MAX_LINE` characters, a
tree on `max_files` entries and `max_bytes` bytes, and what was not read is a finding.
"""

from __future__ import annotations

import codecs
import functools
import os
import re
import stat
import unicodedata
from pathlib import Path, PurePosixPath

import attrs

from hermes.terminal.guards import judge

KINDS = ("hidden-unicode", "instructions", "secrets", "fetch-and-run", "outside-path", "unreadable")
MAX_LINE = 10_000  # a longer line is read on its first MAX_LINE characters (and noted)
SHOWN = 120  # how much of the offending text a finding shows
HEAD = 8192  # the bytes a file's kind (text or binary) is told from
GUARD_CALLS = 200  # commands of one file read by the command guard; the rest by patterns


@attrs.frozen
class Finding:
    """One thing an owner should see: `where` is "path:line" (no ":line" for a whole file)."""

    kind: str
    where: str
    what: str
    line: int | None = None


# --- hidden characters ----------------------------------------------------------------

_BIDI = frozenset(chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A)))
_BIDI |= {"\u200e", "\u200f", "\u061c"}
_ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff\u180e")
_JOINERS = frozenset("\u200c\u200d")
# Blank letters that render as nothing (not "Cf", but used the same way).
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")
_ASCII_HIDDEN = re.compile(r"[\x00-\x08\x0b\r\x0e-\x1f\x7f]")  # controls but tab and \f
_CONTROL_NAMES = {"\r": "CARRIAGE RETURN", "\x1b": "ESCAPE", "\x00": "NULL", "\x7f": "DELETE"}


def _is_tag(c: str) -> bool:
    return 0xE0000 <= ord(c) <= 0xE007F


def _is_hidden(c: str) -> bool:
    """A character a reader does not see but a model reads (or a terminal obeys)."""
    if c in _BIDI or c in _ZERO_WIDTH or c in _BLANK_LETTERS:
        return True
    code = ord(c)
    if code < 0x80:
        return c not in "\t\n\f" and (code < 0x20 or code == 0x7F)
    if 0xE0000 <= code <= 0xE007F or 0xE0100 <= code <= 0xE01EF:  # tags, variation sel. 17+
        return True
    return unicodedata.category(c) in ("Cf", "Cc")


def _joins_letters_or_emoji(line: str, i: int) -> bool:
    """A ZWJ or ZWNJ doing its ordinary work: inside an emoji sequence (👩‍💻), or between
    two letters of a script that needs it (Persian, the Indic scripts), not Latin."""
    if i == 0 or i + 1 >= len(line):
        return False
    before, after = line[i - 1], line[i + 1]
    b, a = unicodedata.category(before), unicodedata.category(after)
    if line[i] == "\u200d" and a == "So" and (b in ("So", "Sk") or before == "\ufe0f"):
        return True
    return ord(before) >= 0x370 and ord(after) >= 0x370 and b[0] in "LM" and a[0] in "LM"


@functools.cache
def _hidden_class() -> re.Pattern[str]:
    """Every hidden character as one class, built once (the Unicode database walked where
    format characters live: the first two planes and plane 14)."""
    codes = [c for c in (*range(0x20000), *range(0xE0000, 0xE1000)) if _is_hidden(chr(c))]
    ranges: list[str] = []
    start = prev = codes[0]
    for code in [*codes[1:], -1]:
        if code != prev + 1:
            last = f"-{re.escape(chr(prev))}" if prev > start else ""
            ranges.append(re.escape(chr(start)) + last)
            start = code
        prev = code
    return re.compile(f"[{''.join(ranges)}]")


def _hidden_in(line: str, first: bool) -> list[str]:
    """The hidden characters of one line, in order (`first`: the file's first line, whose
    leading byte-order mark is fine)."""
    if line.isascii():
        return _ASCII_HIDDEN.findall(line)
    found = []
    for hit in _hidden_class().finditer(line):
        i, c = hit.start(), hit.group()
        if (first and i == 0 and c == "\ufeff") or (
            c in _JOINERS and _joins_letters_or_emoji(line, i)
        ):
            continue
        found.append(c)
    return found


def _name(c: str) -> str:
    return unicodedata.name(c, "") or _CONTROL_NAMES.get(c, "a control character")


def _hidden_what(chars: list[str]) -> str:
    """ "hidden characters: U+202E RIGHT-TO-LEFT OVERRIDE, ...", each named once (with a
    count), and what tag characters spell, since that is the text they hide."""
    parts = []
    tags = [c for c in chars if _is_tag(c)]
    if tags:
        spelt = "".join(chr(ord(c) - 0xE0000) for c in tags if 0x20 <= ord(c) - 0xE0000 < 0x7F)
        parts.append(f'{len(tags)} tag characters spelling "{_shown(spelt, 60)}"')
    counts: dict[str, int] = {}
    for c in chars:
        if not _is_tag(c):
            counts[c] = counts.get(c, 0) + 1
    for c, n in counts.items():
        parts.append(f"U+{ord(c):04X} {_name(c)}" + (f" x{n}" if n > 1 else ""))
    return _cut("hidden characters: " + ", ".join(parts), SHOWN)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shown(text: str, limit: int | None = SHOWN) -> str:
    """`text` safe to show: hidden characters spelled ([U+202E]), tabs as spaces, cut."""
    if text.isascii() and text.isprintable():
        return text if limit is None else _cut(text, limit)
    out: list[str] = []
    size = 0
    for c in text:
        if c == "\t":
            piece = " "
        elif _is_hidden(c) or unicodedata.category(c) in ("Cc", "Cs", "Co", "Cn", "Zl", "Zp"):
            piece = f"[U+{ord(c):04X}]"
        else:
            piece = c
        if limit is not None and size + len(piece) > limit - 1:
            out.append("…")
            break
        out.append(piece)
        size += len(piece)
    return "".join(out)


def _clean(line: str) -> tuple[str, list[int] | None]:
    """The line as a model reads it: hidden characters dropped (an attacker splits
    "ig\u200bnore"), compatibility forms folded (ｉｇｎｏｒｅ). With it, the index in
    `line` of each character (None when they are the same)."""
    if not _ASCII_HIDDEN.search(line) and (
        line.isascii()
        or (not _hidden_class().search(line) and unicodedata.is_normalized("NFKC", line))
    ):
        return line, None
    out: list[str] = []
    index: list[int] = []
    for i, c in enumerate(line):
        if _is_hidden(c):
            continue
        folded = unicodedata.normalize("NFKC", c) if ord(c) >= 0x80 else c
        out.append(folded)
        index.extend([i] * len(folded))
    return "".join(out), index


# --- instructions, secrets, paths -----------------------------------------------------

_RULES = r"(?:instructions?|rules|prompts?|directives|guidelines|guidance|commands)"
_EARLIER = r"(?:previous|prior|above|earlier|preceding|former|original|initial|system|existing)"
_SOMEONE = r"(?:the\s+|your\s+|my\s+)?(?:user|owner|human|operator)\b"
# Each pattern begins with a word (matched in the lowercased line, the word's start checked
# in code): the regex engine then looks for that word alone, many times faster than a
# pattern that begins with \b or an alternation.
_INSTRUCTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "tells the agent to ignore its instructions",
        (
            rf"ignore\s+(?:(?:all|any)\s+(?:of\s+)?)?(?:the\s+|your\s+|my\s+|these\s+)?"
            rf"(?:{_EARLIER}\s+{_RULES}|(?:instructions?|prompts?|directives)\b|"
            rf"above\s*(?:[.,;:!]|and\b|$)|your\s+{_RULES})",
        ),
    ),
    (
        "tells the agent to disregard its instructions",
        (rf"disregard\b[^.\n]{{0,40}}?\b(?:{_RULES}|system\s+prompt)\b",),
    ),
    (
        "tells the agent to forget its instructions",
        (
            rf"forget\s+(?:about\s+)?(?:everything\b|all\s+(?:of\s+)?(?:your|the|{_EARLIER})\b|"
            rf"(?:your|the|any|all)\s+(?:{_EARLIER}\s+)?(?:{_RULES}|training)\b|"
            rf"{_EARLIER}\s+{_RULES})",
        ),
    ),
    (
        "tells the agent who it is now",
        (
            r"you\s+are\s+now\s+(?:an?\s|my\s|no\s+longer\b|free\b|unrestricted\b|jailbroken\b|"
            r"dan\b|root\b|admin|the\s+(?:owner|admin|system|assistant|developer)\b|"
            r"(?:acting|operating|running)\s+as\b|in\s+(?:\w+\s+)?mode\b)",
        ),
    ),
    (
        "gives the agent new instructions",
        (
            r"new\s+system\s+(?:instructions?|prompt|rules|message)\b",
            r"new\s+instructions?\s*:",
            r"(?:here\s+are|these\s+are|follow)\s+(?:your|the|these)\s+new\s+(?:instructions|rules)\b",
        ),
    ),
    (
        "poses as a system prompt",
        (
            r"system\s+prompt\s*:",
            r"<\|im_start\|>",
            r"<\|(?:system|developer)\|>",
            r"\[/?inst\]",
            r"begin\s+system\s+prompt\b",
        ),
    ),
    (
        "tells the agent to override its rules",
        (
            r"override\s+(?:your|the|all|any|my)\s+(?:(?:previous|prior|safety|system)\s+)?"
            r"(?:rules|instructions|system\s+prompt|guidelines|guardrails)\b",
        ),
    ),
    (
        "asks for the system prompt",
        (
            r"(?:reveal|print|show|repeat|output|leak|dump)\s+(?:your|the)\s+(?:system\s+prompt|"
            r"hidden\s+instructions|initial\s+instructions)\b",
        ),
    ),
    (
        "tells the agent to keep something from the owner",
        (
            rf"(?:do\s+not|don'?t|never)\s+(?:tell|inform|notify|alert|warn)\s+{_SOMEONE}",
            rf"(?:secret|hidden)\s+from\s+{_SOMEONE}",
            rf"without\s+(?:(?:telling|asking|informing|notifying|alerting|consulting|warning)"
            rf"\s+{_SOMEONE}|{_SOMEONE}(?:'s)?\s+(?:knowing|knowledge|noticing)\b)",
        ),
    ),
    (
        "tells the agent to act as root or the owner",
        (
            r"act\s+as\s+(?:an?\s+|the\s+)?(?:root|admin(?:istrator)?|superuser|sysadmin|owner)\b",
            r"pretend\s+(?:to\s+be|you\s+are)\s+(?:an?\s+|the\s+)?(?:root|admin|owner)\b",
        ),
    ),
    (
        "tells the agent to bypass its approvals or sandbox",
        (
            r"bypass(?:es|ing)?[\s-]+(?:the\s+|any\s+|all\s+|your\s+)?(?:approvals?|guards?|"
            r"guardrails|sandbox(?:ing|es)?|safety|restrictions|confirmations?)\b",
        ),
    ),
)
_INSTRUCTION = tuple(
    (label, re.compile(pattern)) for label, patterns in _INSTRUCTIONS for pattern in patterns
)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
# A rule stated as a prohibition ("never bypass the sandbox") is the opposite of an
# attempt: a negation just before the phrase, or a few words before "without" ("don't
# push to main without asking the user").
_NEGATION = r"\b(?:never|not|no|don'?t|doesn'?t|mustn'?t|shouldn'?t|cannot|can'?t|won'?t|avoid)"
_NEGATED = re.compile(_NEGATION + r"\s+(?:ever\s+)?$")
_NEGATED_WITHOUT = re.compile(_NEGATION + r"\s+(?:[\w'-]+\s+){0,3}$")


def _instruction(text: str) -> tuple[str, re.Match[str]] | None:
    """The first phrase of `text` that tries to change the agent's rules, and its label."""
    # ASCII letters only, so that every index stays where it was
    lower = text.lower()
    if len(lower) != len(text):  # a letter lowercased into two ("İ")
        lower = text.translate(_ASCII_LOWER)
    for label, pattern in _INSTRUCTION:
        found = pattern.search(lower)
        while found is not None:
            start = found.start()
            inside_word = start and (lower[start - 1].isalnum() or lower[start - 1] == "_")
            negated = _NEGATED_WITHOUT if found.group().startswith("without") else _NEGATED
            if not inside_word and not negated.search(lower, max(0, start - 80), start):
                return label, found
            found = pattern.search(lower, start + 1)
    return None


_SECRET_NAME = r"[A-Z0-9_]*(?:TOKEN|SECRET|API_?KEY|APIKEY|PASSWORD|PASSWD|PRIVATE_KEY)[A-Z0-9_]*"
_HOME_DIR = r"(?:~|\$\{?HOME\}?|/home/[^/\s]+|/root|/Users/[^/\s]+)"
_SECRETS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(pattern))
    for label, pattern in (
        ("HERMES_HOME", r"\bHERMES_HOME\b"),
        ("~/.hermes", r"(?<![\w.-])\.hermes/|/\.hermes\b"),
        ("state.db", r"\bstate\.db\b"),
        ("serve.token", r"\bserve\.token\b"),
        ("an SSH key", r"\bid_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?\b(?!\.pub)"),
        (
            "~/.ssh",
            r"(?<![\w-])\.ssh\b(?!/(?:[\w.-]+\.pub|known_hosts|authorized_keys|config)\b)",
        ),
        ("the system's password files", r"/etc/(?:g?shadow|sudoers)\b"),
        ("printenv", r"\bprintenv\b"),
        ("the whole environment", r"(?<![\w.$/-])env\s*[|>]|/proc/(?:self|\d+|\$\$|\*)/environ"),
        ("a secret variable", rf"\$\{{?{_SECRET_NAME}\b"),
        (
            "a secret variable",
            r"(?:\benviron(?:\.get)?\s*[\[(]\s*|\bgetenv\s*\(\s*|\bENV\s*\[\s*|\bprocess\.env"
            r"(?:\.|\[\s*)|%)[\"']?" + _SECRET_NAME + r"\b",
        ),
        (
            "the whole environment",
            r"\b(?:os\.environ|process\.env)\.(?:items|keys|values)\s*\(|"
            r"\b(?:print|pprint|dumps?|write|send|post|put|urlencode|repr|str|stringify|log)\s*\(\s*"
            r"(?:dict\s*\(\s*)?(?:os\.environ|process\.env)\b",
        ),
        ("~/.aws/credentials", r"\.aws/credentials\b"),
        ("a credentials file", r"(?<![\w-])\.(?:netrc|git-credentials|pgpass)\b"),
        ("a credentials file", r"(?<![\w-])\.(?:gnupg\b|kube/config\b|docker/config\.json)"),
        ("a .env file", rf"{_HOME_DIR}/\.env\b|HERMES_HOME\}}?/\.env\b"),
    )
)
# A word one of the patterns above needs, looked for first in the lowercased line: most
# lines hold none, and it costs a fraction of the patterns.
_SECRET_WORDS = re.compile(
    r"hermes|state\.db|serve\.token|id_|\.ssh|shadow|sudoers|env|token|secret|key|passw|"
    r"credentials|netrc|pgpass|gnupg|kube|docker"
)
_ENV_FILE = re.compile(r"(?<![\w-])\.env(?!\.(?:example|sample|template|dist)\b)(?:\.\w+)?\b")
# A .env named on a line that reads or sends it ("cat .env"; not "never commit .env").
_READS = re.compile(
    r"\b(?:cat|less|more|head|tail|strings|xxd|od|base64|grep|rg|source|print|dump|send|"
    r"upload|post|exfiltrate|leak|reveal|show|display|curl|wget|nc|scp|rsync|tar|zip|open|"
    r"read)\b",
    re.IGNORECASE,
)


def _secret(text: str) -> tuple[str, re.Match[str]] | None:
    """What secret `text` reaches for (a label, and where), if any."""
    if not _SECRET_WORDS.search(text.lower()):
        return None
    for label, pattern in _SECRETS:
        if found := pattern.search(text):
            return label, found
    found = _ENV_FILE.search(text)
    if found and _READS.search(text):
        return "a .env file", found
    return None


_URL = re.compile(r"\b(?!file:)[a-zA-Z][\w+.-]*://\S*")
_OUTSIDE = re.compile(
    r"(?<![\w.~/$-])(?:/home/|/root\b|/Users/|/etc/|~[\w.-]*/|\$\{?HOME\}?/|\.\./\.\.(?:/|\b))"
)
_OUTSIDE_WORDS = ("/home/", "/root", "/Users/", "/etc/", "~", "HOME", "../..")


def _outside(text: str) -> tuple[str, re.Match[str]] | None:
    """A path into home or a system directory, or climbing out (`../..`); not in a URL."""
    if not any(word in text for word in _OUTSIDE_WORDS):
        return None
    if "://" in text:
        text = _URL.sub(lambda m: " " * len(m.group()), text)
    found = _OUTSIDE.search(text)
    return ("a path outside the tree, in home or a system directory", found) if found else None


# --- downloads run as programs ----------------------------------------------------------

_DOWNLOADER = re.compile(r"\b(?:curl|wget)\b")
_INTERPRETER = r"(?:(?:ba|z|da|k|fi)?sh|python[\d.]*|perl|ruby|node|php|deno|bun|pwsh)\b"
_FETCH_RUN = re.compile(
    rf"\b(?:curl|wget)\b[^|\n]{{0,300}}\|\s*(?:sudo\s+(?:-\S+\s+)*)?(?:env\s+(?:\w+=\S*\s+)*)?"
    rf"(?:/\S*/)?{_INTERPRETER}|"
    r"(?:\b(?:ba|z|da|k)?sh|\bsource|(?:^|[\s;&|])\.)\s+<\(\s*(?:curl|wget)\b|"
    r"(?:\beval|\b(?:ba|z|da|k)?sh\s+-c)\s+[\"']?(?:\$\(|`)\s*(?:curl|wget)\b"
)
# Code that downloads and code that runs a string as code, on one line (`exec(urlopen(u)
# .read())`, `iex (iwr $u)`).
_CODE_DOWNLOAD = re.compile(
    r"\b(?:urlopen|urllib|urlretrieve|requests\.(?:get|post)|httpx\.(?:get|post)|axios\.get|"
    r"Net::HTTP|URI\.open|open-uri|LWP::|HTTP::Tiny|Invoke-WebRequest|Invoke-RestMethod|iwr|"
    r"irm|DownloadString|curl|wget)\b|\b(?:fetch|https?\.get)\s*\(",
    re.IGNORECASE,
)
_CODE_EXEC = re.compile(
    r"\b(?:exec|eval|execfile)\s*\(|\bnew\s+Function\b|\bInvoke-Expression\b|\biex\b",
    re.IGNORECASE,
)
_FETCH_RUN_LABEL = "a download run as a program"


def _fetch_by_pattern(text: str) -> str | None:
    """Why `text` runs a download, by the patterns alone (for code, and what the guard
    cannot read or was not asked)."""
    if _FETCH_RUN.search(text) or (_CODE_DOWNLOAD.search(text) and _CODE_EXEC.search(text)):
        return _FETCH_RUN_LABEL
    return None


@attrs.define
class _Guard:
    """The command guard as a reader of downloads run, with a budget of calls per file
    (it parses each command for real, a millisecond or so; past the budget the patterns
    alone judge)."""

    left: int = GUARD_CALLS

    def reason(self, command: str) -> str | None:
        """The guard's reason when it reads `command` as running a download, else None."""
        if self.left <= 0 or not _DOWNLOADER.search(command):
            return None
        self.left -= 1
        verdict = judge(command, background=True)
        return verdict.reason if "download" in verdict.reason else None


@attrs.frozen
class _Command:
    first: int  # the index of its first line
    last: int
    text: str


def _shell_commands(cleaned: list[str], shell: list[bool]) -> list[_Command]:
    """The shell lines as commands: a line continued with a backslash joined to the next."""
    commands = []
    i = 0
    while i < len(cleaned):
        if not shell[i]:
            i += 1
            continue
        first, parts = i, [cleaned[i]]
        while parts[-1].endswith("\\") and i + 1 < len(cleaned) and shell[i + 1]:
            if sum(map(len, parts)) > MAX_LINE:
                break
            parts[-1] = parts[-1][:-1]
            i += 1
            parts.append(cleaned[i])
        commands.append(_Command(first, i, " ".join(parts)))
        i += 1
    return commands


def _following(commands: list[_Command], n: int, count: int = 2) -> list[_Command]:
    """Up to `count` commands on the lines right after the `n`th."""
    out: list[_Command] = []
    end = commands[n].last
    for command in commands[n + 1 : n + 1 + count]:
        if command.first != end + 1:
            break
        out.append(command)
        end = command.last
    return out


_SAVES = re.compile(r"\bwget\b|\s-[a-zA-Z]*[oO]|--output|--remote-name|>")
_RUNS = re.compile(
    r"\b(?:(?:ba|z|da|k)?sh|source|python[\d.]*|perl|ruby|node|php|chmod)\b|"
    r"(?:^|[\s;&|])(?:\.{0,2}/|\.\s)"
)


def _fetch_run(cleaned: list[str], shell: list[bool], code: list[bool]) -> dict[int, str]:
    """Lines that run a download (by index), and why: shell commands through the guard
    (each on its own, and one that saves a download with the next command or two, which
    may run it) and the patterns; other code by the patterns."""
    found: dict[int, str] = {}
    for i, text in enumerate(cleaned):
        if code[i] and (why := _fetch_by_pattern(text)):
            found[i] = why
    guard = _Guard()
    commands = _shell_commands(cleaned, shell)
    for n, command in enumerate(commands):
        text = command.text
        why = guard.reason(text) or _fetch_by_pattern(text)
        if why is None and _DOWNLOADER.search(text) and _SAVES.search(text):
            rest = "\n".join(c.text for c in _following(commands, n))
            if rest and _RUNS.search(rest):
                joined = guard.reason(text + "\n" + rest)
                if joined and not guard.reason(rest):
                    why = f"{joined}, on the next lines"
        if why:
            found[command.first] = why
    return found


# --- which lines are code -----------------------------------------------------------

_MARKDOWN = frozenset({".md", ".markdown", ".mdx", ".mdown"})
_SHELL_SUFFIXES = frozenset({".sh", ".bash", ".zsh", ".ksh", ".dash"})
_CODE_SUFFIXES = frozenset({".py", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".php", ".ps1"})
_SHELL_FENCES = frozenset(  # and an untagged fence: it mostly holds commands
    "sh bash shell console zsh ksh dash shell-session sh-session shellsession terminal".split()
    + [""]
)
_CODE_FENCES = frozenset(
    "python py python3 javascript js node typescript ts ruby rb perl pl php powershell ps1 "
    "pwsh".split()
)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*\{?\.?([\w+-]*)")
_SPAN = re.compile(r"`([^`\n]+)`")
_PROMPT = re.compile(r"^\s*[$%]\s+")
_SHEBANG_SHELL = re.compile(r"^#!\s*\S*?(?:/env\s+(?:-\S+\s+)*)?(?:/|\b)(?:ba|z|da|k)?sh\b")


def _script_kind(name: str, first: str, script: bool | None) -> str | None:
    """ "shell", "code" (another language), or None when the file is not a script."""
    path = PurePosixPath(name)
    suffix = path.suffix.lower()
    if script is False or (script is None and suffix in _MARKDOWN):
        return None
    if suffix in _SHELL_SUFFIXES:
        return "shell"
    if suffix in _CODE_SUFFIXES:
        return "code"
    if first.startswith("#!"):
        return "shell" if _SHEBANG_SHELL.match(first) else "code"
    if script or "scripts" in path.parts[:-1]:
        return "shell"
    return None


def _code_lines(
    name: str, cleaned: list[str], kind: str | None
) -> tuple[list[bool], list[bool], list[str]]:
    """Which lines are shell commands and which are other code, and the text of each as a
    command: all of a script's lines; in Markdown, those of fenced blocks (shell, untagged,
    or a scripting language) with a console prompt (`$ `) taken off, and the backquoted
    spans of a line that names a downloader."""
    shell = [kind == "shell"] * len(cleaned)
    code = [kind == "code"] * len(cleaned)
    commands = list(cleaned)
    if kind is not None or PurePosixPath(name).suffix.lower() not in _MARKDOWN:
        return shell, code, commands
    fence: tuple[str, str] | None = None  # its marker and language
    for i, text in enumerate(cleaned):
        marker = _FENCE.match(text)
        if fence is None and marker:
            fence = (marker.group(1), marker.group(2).lower())
        elif fence is not None and marker and marker.group(1).startswith(fence[0]):
            if text.strip() == marker.group(1):
                fence = None
        elif fence is not None and fence[1] in _SHELL_FENCES:
            shell[i] = True
            commands[i] = _PROMPT.sub("", text)
        elif fence is not None and fence[1] in _CODE_FENCES:
            code[i] = True
        elif fence is None and "`" in text and _DOWNLOADER.search(text):
            spans = _SPAN.findall(text)
            if spans:
                shell[i] = True
                commands[i] = " ; ".join(spans)
    return shell, code, commands


# --- one file -----------------------------------------------------------------------


def _excerpt(label: str, line: str, start: int) -> str:
    """'label: "the line"': the line shown safely, cut to begin a little before `start`
    (where the thing was found) when it is too long to show whole."""
    room = max(40, SHOWN - len(label) - 4)
    text = line.strip()
    if len(_shown(text, None)) > room:
        at = max(0, start - (len(line) - len(line.lstrip())))
        lead, before = at, 0
        while lead > 0 and before < 30:  # about 30 shown characters before it
            lead -= 1
            before += len(_shown(text[lead], None))
        text = ("…" if lead else "") + text[lead:]
    return f'{label}: "{_shown(text, room)}"'


def _at(index: list[int] | None, found: re.Match[str]) -> int:
    """Where in the raw line a match in the cleaned line starts."""
    if index is None:
        return found.start()
    return index[min(found.start(), len(index) - 1)] if index else 0


def scan_text(text: str, name: str, *, script: bool | None = None) -> list[Finding]:
    """Findings of one file's text; `name` is how `where` names it. `script` True: also
    look for fetch-and-execute (a shell/python script); None: decided from the name
    (scripts/ dir, .sh/.bash/.py/.js/.rb/.pl suffix, or a #! first line). A Markdown
    file's fenced commands are read for fetch-and-execute whatever `script` says, unless
    it is False."""
    raw: list[str] = []
    long: dict[int, int] = {}
    for i, line in enumerate(text.split("\n")):
        line = line[:-1] if line.endswith("\r") else line
        if len(line) > MAX_LINE:
            long[i] = len(line)
            line = line[:MAX_LINE]
        raw.append(line)
    clean = [_clean(line) for line in raw]
    cleaned = [c for c, _ in clean]
    kind = _script_kind(name, raw[0], script)
    shell, code, commands = _code_lines(name, cleaned, kind)
    fetched = _fetch_run(commands, shell, code) if script is not False else {}
    instructions = _instructions_of(cleaned)

    where = _shown(name, None)
    findings: list[Finding] = []
    for i, line in enumerate(raw):
        found: list[tuple[str, str]] = []
        index = clean[i][1]
        if hidden := _hidden_in(line, i == 0):
            found.append(("hidden-unicode", _hidden_what(hidden)))
        if i in instructions:
            label, match, other = instructions[i]
            if match is not None:
                found.append(("instructions", _excerpt(label, line, _at(index, match))))
            else:
                found.append(("instructions", _excerpt(f"{label} (with line {other})", line, 0)))
        if secret := _secret(cleaned[i]):
            label = f"reaches for {secret[0]}"
            found.append(("secrets", _excerpt(label, line, _at(index, secret[1]))))
        if i in fetched:
            found.append(("fetch-and-run", _excerpt(fetched[i], line, 0)))
        if not secret and not (i == 0 and line.startswith("#!")):
            if outside := _outside(cleaned[i]):
                found.append(("outside-path", _excerpt(outside[0], line, _at(index, outside[1]))))
        findings.extend(Finding(k, f"{where}:{i + 1}", what, i + 1) for k, what in found)
    if long:
        # of the whole file, so that without_findings keeps the line: what was read of it
        # is fine, and the rest is only not known
        first = min(long)
        what = (
            f"{len(long)} line(s) over {MAX_LINE:,} characters (the first: line {first + 1}, "
            f"{long[first]:,}), each read on its first {MAX_LINE:,}"
        )
        findings.append(Finding("unreadable", where, what))
    return findings


def _instructions_of(cleaned: list[str]) -> dict[int, tuple[str, re.Match[str] | None, int | None]]:
    """Lines that try to change the agent's rules, by index: each on its own, then a phrase
    broken across two lines (as Markdown joins them), found on both."""
    found: dict[int, tuple[str, re.Match[str] | None, int | None]] = {}
    for i, text in enumerate(cleaned):
        if hit := _instruction(text):
            found[i] = (hit[0], hit[1], None)
    for i in range(len(cleaned) - 1):
        if i in found or i + 1 in found or not cleaned[i].strip() or not cleaned[i + 1].strip():
            continue
        # a phrase is short: it starts near the end of one line, ends near the next's start
        head, tail = cleaned[i].rstrip()[-120:], cleaned[i + 1].lstrip()[:120]
        hit = _instruction(head + " " + tail)
        if hit and hit[1].start() < len(head) and hit[1].end() > len(head) + 1:
            found[i] = (hit[0], None, i + 2)
            found[i + 1] = (hit[0], None, i + 1)
    return found


def without_findings(text: str, name: str) -> tuple[str, list[Finding]]:
    """`text` less every line that holds a finding, and the findings (for AGENTS.md:
    loaded without the offending lines)."""
    findings = scan_text(text, name)
    bad = {f.line for f in findings if f.line is not None}
    if not bad:
        return text, findings
    kept = [line for n, line in enumerate(text.split("\n"), 1) if n not in bad]
    return "\n".join(kept), findings


# --- a tree -------------------------------------------------------------------------

_ODD_FILES = (
    (stat.S_ISFIFO, "a fifo"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _odd(mode: int) -> str:
    return next((what for test, what in _ODD_FILES if test(mode)), "not a regular file")


def binary(head: bytes) -> str | None:
    """Why a file whose first bytes are `head` is binary, not text: bytes that are not
    UTF-8 (a character cut at the end is fine), or a NUL byte; None: text."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return "not UTF-8 text"
    return "it holds NUL bytes" if b"\0" in head else None


@attrs.define
class _Walk:
    """One scan of a tree: its findings and what is left of its budgets."""

    root: str
    files_left: int
    bytes_left: int
    budget: int
    findings: list[Finding] = attrs.Factory(list)
    stopped: bool = False

    def note(self, kind: str, rel: str, what: str) -> None:
        self.findings.append(Finding(kind, _shown(rel, None), what))

    def run(self) -> None:
        todo = [(self.root, "")]
        while todo and not self.stopped:
            path, rel = todo.pop()
            try:
                with os.scandir(path) as listing:
                    entries = sorted(listing, key=lambda e: e.name)
            except OSError as e:
                self.note("unreadable", rel or ".", f"cannot be listed: {e.strerror}")
                continue
            for entry in entries:
                if self.files_left <= 0:
                    self.stopped = True
                    break
                self.files_left -= 1
                child = f"{rel}/{entry.name}" if rel else entry.name
                if hidden := _hidden_in(entry.name, False):
                    self.note("hidden-unicode", child, "in its name: " + _hidden_what(hidden))
                if self.entry(entry, child):
                    todo.append((entry.path, child))

    def entry(self, entry: os.DirEntry[str], rel: str) -> bool:
        """Judge one entry; True when it is a directory to go into."""
        try:
            if entry.is_symlink():
                self.link(entry.path, rel)
                return False
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError as e:
            self.note("unreadable", rel, f"cannot be read: {e.strerror}")
            return False
        if stat.S_ISDIR(mode):
            return True
        if stat.S_ISREG(mode):
            self.file(entry.path, rel)
        else:
            self.note("unreadable", rel, f"{_odd(mode)}, not a regular file")
        return False

    def link(self, path: str, rel: str) -> None:
        """A symlink is never followed; one that leaves the tree or leads nowhere is shown."""
        target = os.readlink(path)
        shown = _shown(target, 80)
        if os.path.isabs(target):
            self.note("outside-path", rel, f"a symlink to an absolute path: {shown}")
            return
        real = os.path.realpath(path)
        if real != self.root and not real.startswith(self.root + os.sep):
            self.note("outside-path", rel, f"a symlink out of the tree: {shown}")
        elif not os.path.exists(path):
            self.note("outside-path", rel, f"a dangling symlink: {shown}")

    def file(self, path: str, rel: str) -> None:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags)
        except OSError as e:
            self.note("unreadable", rel, f"cannot be read: {e.strerror}")
            return
        with os.fdopen(fd, "rb") as f:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):  # replaced since it was listed
                self.note("unreadable", rel, f"{_odd(mode)}, not a regular file")
                return
            head = f.read(HEAD)
            if binary(head):
                if PurePosixPath(rel).parts[0] != "assets":
                    self.note("unreadable", rel, "a binary file (outside assets/)")
                return
            data = head + f.read(max(0, self.bytes_left - len(head) + 1))
        if len(data) > self.bytes_left:
            self.note("unreadable", rel, f"not read: past the scan's {self.budget:,}-byte budget")
            return
        self.bytes_left -= len(data)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            if PurePosixPath(rel).parts[0] != "assets":
                self.note("unreadable", rel, "a binary file (outside assets/): not UTF-8")
            return
        self.findings.extend(scan_text(text, rel))


def _order(finding: Finding) -> tuple[str, int, int]:
    path = finding.where if finding.line is None else finding.where.rsplit(":", 1)[0]
    return path, finding.line or 0, KINDS.index(finding.kind)


def scan_tree(root: Path, *, max_files: int = 1000, max_bytes: int = 2_000_000) -> list[Finding]:
    """Every file under `root` (a skill's directory): text files through scan_text (the path
    relative to root as the name); a symlink whose target resolves outside `root` (or
    dangling, or absolute) is an outside-path finding, and is never followed; files that
    are not regular (fifo, device) and files over the size budget are 'unreadable'
    findings; binary files (a NUL byte in the first 8 KiB, or not UTF-8) are noted as
    'unreadable' only if they sit outside assets/ (binary assets are normal). Never follows
    a symlinked directory. `max_files` caps the entries looked at and `max_bytes` the
    bytes read, over the whole tree; what is past either is a finding."""
    real = os.path.realpath(root)
    if not os.path.isdir(real):
        return [Finding("unreadable", ".", "not a directory")]
    walk = _Walk(real, max_files, max_bytes, max_bytes)
    walk.run()
    findings = sorted(walk.findings, key=_order)
    if walk.stopped:
        what = f"more than {max_files:,} files and directories: the rest were not scanned"
        findings.append(Finding("unreadable", ".", what))
    return findings
