"""A bash command line as the simple commands it runs, read with a real parser
(tree-sitter-bash), so the guard judges each program and its arguments, not text
that only looks like a command.

What runs is looked for everywhere the shell would find it: lists, pipelines,
newlines, `$(...)`, backquotes, `<(...)`/`>(...)`, subshells, `{ ...; }`, functions,
if/while/for/case bodies, redirections. Wrappers (`env`, `sudo -u`, `timeout`, ...)
are looked through to the command they run, and text a shell runs again (`sh -c`,
`eval`, `su -c`, `env -S`, `watch`, a heredoc or `echo` fed to a shell) is read
again, a bounded number of levels deep. What cannot be read is said in
`Line.unparsed` and `Line.unjudged`, for the guard to fail closed on.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from functools import cache

import attrs
import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from hermes.terminal.shell_programs import (
    RUNNERS,
    SHELLS,
    STDIN_FILES,
    WRAPPERS,
    Call,
    Options,
    Word,
    code_of,
    find_exec,
    joined,
    program_name,
    su_command,
    wrapped,
)

MAX_NESTING = 3  # levels of `sh -c`/`eval`/`su -c` text read again
MAX_DEPTH = 120  # syntax nested deeper than this is not walked (and not judged)
MAX_HOPS = 12  # wrappers looked through in one simple command

_DQ_ESCAPE = re.compile(r'\\([$`"\\])|\\\n')
_WORD_ESCAPE = re.compile(r"\\(.)|\\\n", re.DOTALL)
_ANSI_C = re.compile(
    r"\\(?:x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|([0-7]{1,3})|c(.)|(.))",
    re.DOTALL,
)
_ANSI_C_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n"}
_ANSI_C_SIMPLE |= {"r": "\r", "t": "\t", "v": "\v"}


_local = threading.local()


@cache
def _language() -> Language:
    return Language(tree_sitter_bash.language())


def _parser() -> Parser:
    """Built once per thread (a parser is not thread-safe), as it costs far more than a parse."""
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_language())
    return parser


@attrs.frozen
class Redirect:
    """`op` is the operator as written (`>`, `>>`, `<`, `&>`, `<<`, `<<<`, ...)."""

    op: str
    target: Word

    @property
    def writes(self) -> bool:
        return self.op.lstrip("0123456789").startswith((">", "&>")) and self.op != ">&"


@attrs.define(eq=False)
class Simple:
    """One simple command: its words and redirections and where it sits in the line."""

    words: list[Word]
    redirects: list[Redirect]
    pipe: tuple[int, int] | None  # (pipeline, stage) when it is a stage of a pipeline
    inside: int | None  # the simple command whose word (`inside_word`) holds this one
    inside_word: Word | None  # ... in a `$(...)`, backquotes or `<(...)`
    function: str | None  # the function whose body it is in
    calls: list[Call] = attrs.Factory(list)
    background: bool = False  # followed by `&`


@attrs.define
class Line:
    """Everything a command line runs, and what of it could not be read."""

    simples: list[Simple] = attrs.Factory(list)
    background: bool = False  # the line ends by putting something in the background
    loops_forever: bool = False  # `while true`, `while :`, `until false`
    unparsed: str | None = None  # the first text the parser could not read
    unjudged: list[str] = attrs.Factory(list)  # why some of it cannot be judged
    limit: int | None = None  # read no more simple commands than this ...
    truncated: bool = False  # ... and this says it stopped there
    calls: tuple[Call, ...] = ()  # every program run, in order (set when read)
    _pipes: int = 0
    _stages: dict[tuple[int, int], list[Simple]] = attrs.Factory(dict)

    def new_pipe(self) -> int:
        self._pipes += 1
        return self._pipes

    def add(self, simple: Simple) -> int:
        if self.limit is not None and len(self.simples) >= self.limit:
            self.truncated = True
            raise _Full
        self.simples.append(simple)
        if simple.pipe is not None:
            self._stages.setdefault(simple.pipe, []).append(simple)
        return len(self.simples) - 1

    def stage(self, pipe: tuple[int, int]) -> list[Simple]:
        """The simple commands of one stage of a pipeline."""
        return self._stages.get(pipe, [])

    def later(self, simple: Simple) -> list[Simple]:
        """The simple commands of the stages after `simple`'s in its pipeline."""
        if simple.pipe is None:
            return []
        pipe, stage = simple.pipe
        return [s for (p, n), ss in self._stages.items() if p == pipe and n > stage for s in ss]


class _Full(Exception):
    """The line holds `limit` simple commands: reading stops."""


def read_line(command: str, limit: int | None = None) -> Line:
    """Every simple command `command` runs, wrappers and nested shells looked through
    (the first `limit` of them, then `truncated` is set)."""
    line = Line(limit=limit)
    try:
        _Reader(line).read(command, _Where())
    except _Full:
        pass
    line.calls = tuple(call for simple in line.simples for call in simple.calls)
    return line


# --- words --------------------------------------------------------------------------


def _last(node: Node) -> bool:
    """Whether nothing but comments follows `node` where it stands."""
    after = node.next_sibling
    while after is not None and after.type == "comment":
        after = after.next_sibling
    return after is None


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _value(node: Node) -> str | None:
    """The word's value after quoting and escapes; None when an expansion is in it."""
    kind = node.type
    if kind == "command_name":
        named = node.named_children
        return _value(named[0]) if len(named) == 1 else None
    if kind == "word":
        return _WORD_ESCAPE.sub(lambda m: m.group(1) or "", _text(node))
    if kind == "number":
        return _text(node)
    if kind == "raw_string":
        return _text(node)[1:-1]
    if kind == "string":
        parts = []
        for child in node.named_children:
            if child.type != "string_content":
                return None
            parts.append(_text(child))
        return _DQ_ESCAPE.sub(lambda m: m.group(1) or "", "".join(parts))
    if kind == "translated_string":
        named = node.named_children
        return _value(named[0]) if len(named) == 1 else None
    if kind == "ansi_c_string":
        return _ansi_c(_text(node)[2:-1])
    if kind == "concatenation":
        parts = []
        for child in node.children:
            value = _value(child)
            if value is None:
                return None
            parts.append(value)
        return "".join(parts)
    return None


def _ansi_c(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        hex2, hex4, hex8, octal, control, other = m.groups()
        if hex2 or hex4 or hex8:
            return chr(min(int(hex2 or hex4 or hex8, 16), 0x10FFFF))
        if octal:
            return chr(int(octal, 8) & 0xFF)
        if control:
            return chr(ord(control) & 0x1F)
        return _ANSI_C_SIMPLE.get(other, other)

    return _ANSI_C.sub(one, body)


def _word(node: Node) -> Word:
    return Word(_text(node), _value(node))


# --- reading ----------------------------------------------------------------------

_REDIRECTS = ("file_redirect", "heredoc_redirect", "herestring_redirect")
_HEREDOC_PARTS = ("heredoc_start", "heredoc_body", "heredoc_end", *_REDIRECTS)
_PIPES = ("|", "|&")


@attrs.frozen
class _Where:
    """Where the node being read sits: its pipeline stage, the simple command whose word
    holds it (a substitution), the function it is in, and how deep it is."""

    pipe: tuple[int, int] | None = None
    inside: int | None = None
    inside_word: Word | None = None
    function: str | None = None
    depth: int = 0
    nesting: int = 0


class _Reader:
    """Walks a parse tree into a Line; text a shell runs again is read into the same Line."""

    def __init__(self, line: Line) -> None:
        self.line = line

    def read(self, source: str, where: _Where) -> None:
        tree = _parser().parse(source.encode("utf-8", "surrogatepass"))
        self.visit(tree.root_node, where)

    def unjudged(self, why: str) -> None:
        if why not in self.line.unjudged:
            self.line.unjudged.append(why)

    def visit(self, node: Node, where: _Where) -> None:
        if where.depth > MAX_DEPTH:
            self.unjudged("it is nested too deeply to read")
            return
        kind = node.type
        if node.is_error:
            if self.line.unparsed is None:
                self.line.unparsed = _text(node)[:80]
        elif not node.is_named:
            # `x &` at the end leaves x running after the line: `x & y; wait` does not
            self.line.background |= kind == "&" and _last(node)
            return
        where = attrs.evolve(where, depth=where.depth + 1)
        if kind == "comment":
            return
        if kind == "command":
            self.command(node, [], where)
            return
        if kind == "redirected_statement":
            self.redirected(node, where)
            return
        if kind == "pipeline":
            self.stages(node.children, attrs.evolve(where, pipe=(self.line.new_pipe(), 0)))
            return
        if kind == "function_definition":
            name = node.child_by_field_name("name")
            where = attrs.evolve(where, function=_text(name) if name is not None else None)
        elif kind in ("command_substitution", "process_substitution"):
            where = attrs.evolve(where, pipe=None)
        elif kind == "while_statement":
            self.check_forever(node)
        children = node.children
        for i, child in enumerate(children):
            first = len(self.line.simples)
            self.visit(child, where)
            if i + 1 < len(children) and children[i + 1].type == "&":
                for simple in self.line.simples[first:]:
                    simple.background = True

    def stages(self, children: Sequence[Node], where: _Where) -> None:
        """The stages of a pipeline (each `|` starts the next)."""
        assert where.pipe is not None
        stage = where.pipe[1]
        for child in children:
            if child.type in _PIPES:
                stage += 1
            else:
                self.visit(child, attrs.evolve(where, pipe=(where.pipe[0], stage)))

    def check_forever(self, node: Node) -> None:
        keyword = node.children[0].type if node.children else ""
        condition = [c for c in node.children if c.is_named and c.type != "do_group"]
        if len(condition) == 1 and condition[0].type == "command":
            words = [_value(c) for c in condition[0].named_children]
            forever = {"while": [["true"], [":"]], "until": [["false"]]}.get(keyword, [])
            self.line.loops_forever |= words in forever

    def redirected(self, node: Node, where: _Where) -> None:
        body = node.child_by_field_name("body")
        redirects = [c for c in node.children if c.type in _REDIRECTS]
        # tree-sitter-bash hangs what follows `<<EOF` on the line (`| sh`, `&& x`)
        # off the heredoc node: a pipeline there continues this statement's pipeline
        tails = [
            c
            for r in redirects
            if r.type == "heredoc_redirect"
            for c in r.children
            if c.type not in _HEREDOC_PARTS and not c.type.startswith("<<")
        ]
        if any(t.type == "pipeline" for t in tails):
            where = attrs.evolve(where, pipe=(self.line.new_pipe(), 0))
        if body is not None and body.type == "command":
            self.command(body, redirects, where)
        else:
            index = self.line.add(
                Simple([], [], where.pipe, where.inside, where.inside_word, where.function)
            )
            self.attach(index, redirects, where)
            if body is not None:
                self.visit(body, where)
        for tail in tails:
            if tail.type == "pipeline" and where.pipe is not None:
                self.stages(tail.children, where)
            else:
                self.visit(tail, attrs.evolve(where, pipe=None))
        for child in node.children:  # stray parts (an ERROR, a trailing `&`)
            if child != body and child.type not in _REDIRECTS:
                self.visit(child, where)

    def command(self, node: Node, redirects: list[Node], where: _Where) -> None:
        words: dict[int, Word] = {}
        redirects = list(redirects)
        for i, child in enumerate(node.children):
            if child.type in _REDIRECTS:
                redirects.append(child)
            elif node.field_name_for_child(i) in ("name", "argument") and not child.is_error:
                words[i] = _word(child)
        simple = Simple(
            list(words.values()), [], where.pipe, where.inside, where.inside_word, where.function
        )
        index = self.line.add(simple)
        inner = attrs.evolve(where, pipe=None, inside=index)
        for i, child in enumerate(node.children):
            if child.type not in _REDIRECTS:
                self.visit(child, attrs.evolve(inner, inside_word=words.get(i)))
        self.attach(index, redirects, where)
        self.resolve(index, where)

    def attach(self, index: int, nodes: list[Node], where: _Where) -> None:
        """Record a simple command's redirections, and read the commands inside them
        (`> >(tee f)`, a heredoc's `$(...)`)."""
        simple = self.line.simples[index]
        inner = attrs.evolve(where, pipe=None, inside=index)
        for node in nodes:
            if node.type == "heredoc_redirect":
                body = next((c for c in node.children if c.type == "heredoc_body"), None)
                text = _text(body) if body is not None else ""
                if node.children and node.children[0].type == "<<-":
                    text = re.sub(r"(?m)^\t+", "", text)
                # the body as written: what a shell fed it reads (its expansions are seen)
                word = Word(text, text)
                simple.redirects.append(Redirect("<<", word))
                if body is not None:
                    self.visit(body, attrs.evolve(inner, inside_word=word))
                # `cat <<EOF > f`: the file redirect hangs off the heredoc node
                self.attach(index, [c for c in node.children if c.type in _REDIRECTS], where)
                continue
            if node.type == "herestring_redirect":
                op, target = "<<<", next(iter(node.named_children), None)
            else:
                op = "".join(_text(c) for c in node.children if not c.is_named) or ">"
                target = node.child_by_field_name("destination") or next(
                    (c for c in node.named_children if c.type != "file_descriptor"), None
                )
            if target is None:
                continue
            word = _word(target)
            simple.redirects.append(Redirect(op, word))
            self.visit(target, attrs.evolve(inner, inside_word=word))

    # --- what a simple command runs ---------------------------------------------

    def resolve(self, index: int, where: _Where) -> None:
        simple = self.line.simples[index]
        pending = [simple.words] if simple.words else []
        hops = 0
        while pending:
            argv = pending.pop(0)
            hops += 1
            if hops > MAX_HOPS:
                self.unjudged("it wraps commands in too many others to judge")
                return
            call = Call(program_name(argv[0]), argv[0], tuple(argv[1:]), index)
            simple.calls.append(call)
            pending.extend(self.looked_through(call, simple, where))

    def looked_through(self, call: Call, simple: Simple, where: _Where) -> list[list[Word]]:
        """The commands `call` runs in turn (a wrapper's command, find's -exec); text it
        runs as a shell (sh -c, eval, su -c, env -S, watch) is read into the line here."""
        program, args = call.program, list(call.args)
        if program is None:
            return []
        opts = WRAPPERS.get(program)
        if opts is None and args and args[0].value is not None:
            opts = RUNNERS.get((program, args[0].value))
            args = args[1:] if opts is not None else args
        if program == "su":
            text = su_command(args)
            if text is not None:
                self.nested(program, text, simple, where)
            return []
        if opts is not None:
            runs = wrapped(args, opts)
            if runs.text is not None:
                rest = args[runs.start :] if program == "env" and runs.start is not None else []
                self.nested(program, joined([runs.text, *rest]), simple, where)
                return []
            return [args[runs.start :]] if runs.start is not None else []
        if program == "find":
            return find_exec(args)
        if program == "trap":  # trap 'text' SIGNAL: the text runs later, in this shell
            runs = wrapped(args, Options(none="lp"))
            if runs.start is not None and len(args) > runs.start + 1:
                self.nested(program, args[runs.start], simple, where)
            return []
        if program == "watch":  # runs its arguments with sh -c, or as an argv with -x
            runs = wrapped(args, Options("n", frozenset({"interval"})))
            if runs.start is None:
                return []
            if any(a.value in ("-x", "--exec") for a in args[: runs.start]):
                return [args[runs.start :]]
            self.nested(program, joined(args[runs.start :]), simple, where)
            return []
        code = code_of(call)
        if code is None or not (program in ("eval", "source", ".") or program in SHELLS):
            return []
        if code.kind == "text" and code.word is not None:
            self.nested(program, code.word, simple, where)
        elif code.kind == "stdin" or (code.word is not None and code.word.loose in STDIN_FILES):
            fed = self.fed_to(simple)
            if fed is not None:
                self.nested(program, fed, simple, where)
        return []

    def fed_to(self, simple: Simple) -> Word | None:
        """The text a shell reads on stdin where the line shows it: a heredoc or a
        herestring, or `echo`/`printf`/`cat <<EOF` in the stage before."""
        for redirect in simple.redirects:
            if redirect.op in ("<<", "<<<"):
                return redirect.target
        before = shell_input(simple, self.line)
        if before is None or not before.calls:
            return None
        feeder = before.calls[-1]
        if feeder.program == "echo":
            words = list(feeder.args)
            while words and words[0].value in ("-n", "-e", "-E", "-ne", "-en"):
                words.pop(0)
            return joined(words)
        if feeder.program == "printf" and feeder.args:
            printed = joined(feeder.args)
            value = printed.value.replace("\\n", "\n") if printed.value is not None else None
            return Word(printed.text, value)
        if feeder.program == "cat" and not feeder.args:
            return next((r.target for r in before.redirects if r.op in ("<<", "<<<")), None)
        return None

    def nested(self, program: str, text: Word, simple: Simple, where: _Where) -> None:
        """Read text a shell runs again into the same line, a bounded number of levels."""
        if text.value is None:
            self.unjudged(f"{program} runs text given by an expansion, which cannot be judged")
        elif where.nesting >= MAX_NESTING:
            self.unjudged(f"{program} runs commands nested too deeply to judge")
        else:
            again = _Where(
                inside=simple.inside,
                inside_word=simple.inside_word,
                depth=where.depth,
                nesting=where.nesting + 1,
            )
            self.read(text.value, again)


def shell_input(simple: Simple, line: Line) -> Simple | None:
    """The stage before `simple` in its pipeline (what it reads on stdin), if one."""
    if simple.pipe is None or simple.pipe[1] == 0:
        return None
    before = line.stage((simple.pipe[0], simple.pipe[1] - 1))
    return before[0] if len(before) == 1 else None
