"""What a program's arguments mean to the guard: the program a name runs, the command
a wrapper (`env`, `sudo -u`, `timeout`, ...) runs, and where an interpreter (`sh`,
`python3`, `eval`, `source`, ...) takes the program it runs from."""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

_QUOTES = re.compile(r"[\"']")
_EXPANDS = re.compile(r"[*?\[]|\{[^}]*(?:,|\.\.)[^}]*\}")  # globs and braces in a name
_SUBSTITUTES = re.compile(r"[$`(){}\\]")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish"})
STDIN_FILES = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})


@attrs.frozen(eq=False)
class Word:
    """A word as written (`text`) and its value when no expansion is in it (`value`)."""

    text: str
    value: str | None

    @property
    def loose(self) -> str:
        """The value, or the text without its quotes: what a path is recognised in."""
        return self.value if self.value is not None else _QUOTES.sub("", self.text)


@attrs.frozen(eq=False)
class Call:
    """A program run with its arguments: a simple command, or what a wrapper in it runs."""

    program: str | None  # the name without its directory; None when given by an expansion
    name: Word
    args: tuple[Word, ...]
    simple: int  # index of its simple command in Line.simples


def program_name(word: Word) -> str | None:
    """`/usr/bin/sudo`, `\\sudo` and `"sudo"` are all `sudo`, and so is `"$DIR"/sudo`;
    None when the name itself comes from an expansion, a glob or braces (`$X`, `sud?`)."""
    name = (word.value if word.value is not None else word.loose).rsplit("/", 1)[-1]
    if _EXPANDS.search(name) or (word.value is None and _SUBSTITUTES.search(name)):
        return None
    return name


def joined(words: Sequence[Word]) -> Word:
    """Words a shell joins with spaces and runs again (`eval a b`, `watch a b`)."""
    values = [w.value for w in words if w.value is not None]
    value = " ".join(values) if len(values) == len(words) else None
    return Word(" ".join(w.text for w in words), value)


# --- wrappers and interpreters -------------------------------------------------------


@attrs.frozen
class Options:
    """How a wrapper writes its own options, to find the command it runs."""

    values: str = ""  # short options that take a value
    long_values: frozenset[str] = frozenset()
    assignments: bool = False  # NAME=value words before the command (env, sudo)
    operands: int = 0  # operands before the command (timeout's duration)
    none: str = ""  # short options after which no command runs (command -v)
    text: str = ""  # short options whose value is a command line (env -S, flock -c)
    long_text: frozenset[str] = frozenset()


def _f(*names: str) -> frozenset[str]:
    return frozenset(names)


WRAPPERS: dict[str, Options] = {
    "env": Options("uCP", _f("unset", "chdir"), True, text="S", long_text=_f("split-string")),
    "time": Options("fo", _f("format", "output")),
    "nice": Options("n", _f("adjustment")),
    "nohup": Options(),
    "timeout": Options("sk", _f("signal", "kill-after"), operands=1),
    "xargs": Options(
        "aEdILnPs",
        _f("arg-file", "delimiter", "max-lines", "max-args", "max-procs", "max-chars"),
    ),
    "sudo": Options(
        "ugCDhprtTUR",
        _f("user", "group", "close-from", "chdir", "host", "prompt", "role", "type"),
        True,
    ),
    "doas": Options("uC"),
    "command": Options(none="vV"),
    "builtin": Options(),
    "exec": Options("a"),
    "stdbuf": Options("ioe", _f("input", "output", "error")),
    "ionice": Options("cn", _f("class", "classdata"), none="pPu"),
    "setsid": Options(),
    "busybox": Options(),
    "coproc": Options(),
    "taskset": Options(operands=1, none="p"),
    "npx": Options("p", _f("package"), text="c", long_text=_f("call")),
    "bunx": Options("p", _f("package")),
    "flock": Options("wEn", _f("timeout", "conflict-exit-code"), operands=1, text="c"),
    "script": Options("TIOB", _f("log-timing", "log-in", "log-out"), text="c"),
}
# `uv run X`, `poetry run X`, ...: a runner's subcommand that runs a program.
RUNNERS: dict[tuple[str, str], Options] = {
    (tool, sub): Options(
        "p", _f("with", "python", "project", "directory", "extra", "group", "env-file")
    )
    for tool, sub in [
        ("uv", "run"),
        ("poetry", "run"),
        ("pipenv", "run"),
        ("pdm", "run"),
        ("npm", "exec"),
        ("pnpm", "exec"),
        ("pnpm", "dlx"),
        ("yarn", "dlx"),
        ("bundle", "exec"),
        ("conda", "run"),
    ]
}


@attrs.frozen
class Runs:
    """What a wrapper runs: the command at `start` in its arguments, or a command `text`
    (then `start` is where the arguments after it begin)."""

    start: int | None = None
    text: Word | None = None


def wrapped(args: Sequence[Word], opts: Options) -> Runs:
    """Skip a wrapper's own options (and operands, and NAME=value) to what it runs."""
    i, operands, options = 0, opts.operands, True
    while i < len(args):
        value = args[i].value
        if value is None:
            return Runs(i)  # an expansion: the command, unknown
        if options and value == "--":
            options = False
        elif options and value.startswith("--") and len(value) > 2:
            name, eq, rest = value[2:].partition("=")
            if name in opts.long_text:
                return Runs(i + 1, Word(rest, rest)) if eq else Runs(i + 2, _arg(args, i + 1))
            i += 1 if eq or name not in opts.long_values else 2
            continue
        elif options and value.startswith("-") and len(value) > 1:
            for j, char in enumerate(value[1:], start=2):
                if char in opts.none:
                    return Runs()
                if char in opts.text:
                    rest = value[j:]
                    return Runs(i + 1, Word(rest, rest)) if rest else Runs(i + 2, _arg(args, i + 1))
                if char in opts.values:
                    i += 1 if j < len(value) else 2
                    break
            else:
                i += 1
            continue
        elif opts.assignments and _ASSIGNMENT.match(value):
            pass
        elif operands:
            operands -= 1
        else:
            return Runs(i)
        i += 1
    return Runs()


def _arg(args: Sequence[Word], i: int) -> Word | None:
    return args[i] if i < len(args) else None


@attrs.frozen
class Code:
    """Where an interpreter takes its program from: `stdin`, a `file`, a `text`, or `none`
    (a module, a listing, ...); `word` is the file or the text."""

    kind: str
    word: Word | None = None


@attrs.frozen
class Interpreter:
    """How an interpreter is told where its program is."""

    text: str  # short options whose value (or, for shells, first operand) is the program
    values: str  # other short options that take a value
    long_text: frozenset[str] = frozenset()
    long_values: frozenset[str] = frozenset()
    module: str = ""  # short options that run something other than a file (python -m)
    stdin: str = ""  # short options that read the program on stdin (sh -s)
    text_is_operand: bool = False  # sh -c TEXT: the text is the first operand


_SHELL = Interpreter(
    "c", "oO", long_values=_f("rcfile", "init-file"), stdin="s", text_is_operand=True
)
_INTERPRETERS: list[tuple[re.Pattern[str], Interpreter]] = [
    (re.compile(r"(?:python|pypy)[\d.]*"), Interpreter("c", "WXQ", module="m")),
    (re.compile(r"perl[\d.]*"), Interpreter("eE", "IMmx")),
    (re.compile(r"ruby[\d.]*"), Interpreter("e", "IrCE")),
    (re.compile(r"node(?:js)?|bun|deno"), Interpreter("ep", "r", _f("eval", "print"))),
    (re.compile(r"php[\d.]*"), Interpreter("rBRE", "dcz", module="S")),
    (re.compile(r"lua[\d.]*|tclsh[\d.]*|Rscript"), Interpreter("e", "l")),
]


def interpreter(program: str | None) -> Interpreter | None:
    """The interpreter `program` is (a shell, python3, perl, ...), or None."""
    if program is None:
        return None
    if program in SHELLS:
        return _SHELL
    for pattern, spec in _INTERPRETERS:
        if pattern.fullmatch(program):
            return spec
    return None


def code_of(call: Call) -> Code | None:
    """Where the interpreter `call` runs takes its program from; None if it is none.
    `source F`/`. F` run file F; `eval` runs its arguments as text."""
    if call.program in ("source", "."):
        return Code("file", call.args[0]) if call.args else Code("none")
    if call.program == "eval":
        return Code("text", joined(call.args))
    spec = interpreter(call.program)
    if spec is None:
        return None
    args, i, wants_text, wants_stdin = call.args, 0, False, False
    while i < len(args):
        value = args[i].value
        if value is None or value == "-" or not value.startswith(("-", "+")) or value == "--":
            if value == "--":
                i += 1
            break
        if value.startswith("--"):
            name, eq, rest = value[2:].partition("=")
            if name in spec.long_text:
                return Code("text", Word(rest, rest) if eq else _arg(args, i + 1))
            i += 1 if eq or name not in spec.long_values else 2
            continue
        for j, char in enumerate(value[1:], start=2):
            if char in spec.text:
                if spec.text_is_operand:
                    wants_text = True
                    continue
                rest = value[j:]
                return Code("text", Word(rest, rest) if rest else _arg(args, i + 1))
            if char in spec.module:
                return Code("none")
            wants_stdin |= char in spec.stdin
            if char in spec.values:
                i += 0 if j < len(value) else 1
                break
        i += 1
    operand = _arg(args, i)
    if wants_text:
        return Code("text", operand)
    if wants_stdin or operand is None or operand.value == "-":
        return Code("stdin")
    return Code("file", operand)


def su_command(args: Sequence[Word]) -> Word | None:
    """`su [-] [user] -c CMD`: su takes -c anywhere."""
    for i, arg in enumerate(args):
        value = arg.value or ""
        if value.startswith("--command="):
            rest = value.partition("=")[2]
            return Word(rest, rest)
        if value == "--command" or (
            value.startswith("-") and not value.startswith("--") and value.endswith("c")
        ):
            return _arg(args, i + 1)
    return None


def find_exec(args: Sequence[Word]) -> list[list[Word]]:
    """`find ... -exec CMD {} ;`: each command find runs."""
    runs, i = [], 0
    while i < len(args):
        if args[i].value in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(args) and args[j].value not in (";", "+"):
                j += 1
            if j > i + 1:
                runs.append(list(args[i + 1 : j]))
            i = j
        i += 1
    return runs
