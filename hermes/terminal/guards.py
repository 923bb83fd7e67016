"""What a command may not do: hard blocks, what needs an owner's approval, and
foreground commands that would never end.

The command is read with a real shell parser (hermes.terminal.shell_parse) into the
programs it runs, wrappers looked through, and each rule judges a program and its
arguments (or the line as a whole: a download run by a shell, a secret sent out).
What cannot be read or judged needs approval: the guard fails closed where it cannot
see. It is a convenience in front of the sandbox, never the boundary.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterator, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

import attrs

from hermes.home import default_home
from hermes.terminal.shell_parse import Line, Simple, read_line, shell_input
from hermes.terminal.shell_programs import SHELLS, STDIN_FILES, Call, Word, code_of

MAX_CHARS = 100_000  # longer commands are not read before an owner approves them
MAX_COMMANDS = 300  # a line that runs more is not judged line-wide before an owner approves

Rule = tuple[str, Callable[[Line], bool]]

_SYSTEM_DIRS = frozenset(
    "bin boot dev etc home lib lib32 lib64 libx32 opt proc root sbin srv sys usr var".split()
)
_CHMOD_DIRS = frozenset("bin boot etc lib lib64 opt root sbin usr var".split())
_RAW_DISK = re.compile(r"/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)\w*")
_HOME = re.compile(r"^(?:~[\w.-]*|\$HOME|\$\{HOME\})(?=/|$)")
_BRACE = re.compile(r"\{([^{}]*,[^{}]*)\}")  # an innermost brace list, `{a,b}`
_GLOB = re.compile(r"[*?\[]")
_DROP = re.compile(r"\bDROP\s+(?:DATABASE|TABLE|SCHEMA)\b", re.IGNORECASE)
_DOWNLOADERS = frozenset({"curl", "wget"})
_NETWORK = frozenset("curl wget nc ncat netcat socat ssh sftp telnet ftp".split())
_COPIERS = frozenset({"scp", "rsync"})  # the network only with a remote operand
_AS_ROOT = frozenset({"sudo", "sudoedit", "doas", "su", "pkexec", "run0"})
_SECRET_NAMES = frozenset(
    {".env", "serve.token", "state.db", "state.db-wal", ".netrc", ".git-credentials"}
)
_NOT_SECRET_ENV = re.compile(r"\.env\.(?:example|sample|template|dist)")
_SECRET_PATHS = frozenset({"/etc/shadow", "/etc/gshadow", "/etc/sudoers"})
_VALUE_OF = re.compile(r"[=@<]")
_REMOTE = re.compile(r"[^/\s]*:")
_PYTHON = re.compile(r"python[\d.]*")


# --- helpers ------------------------------------------------------------------------


def _options(args: Sequence[Word]) -> tuple[set[str], list[Word]]:
    """Short option letters and long options (before `--`), and the operands."""
    flags: set[str] = set()
    operands: list[Word] = []
    ended = False
    for arg in args:
        value = arg.value
        if ended or value is None or not value.startswith("-") or value == "-":
            operands.append(arg)
        elif value == "--":
            ended = True
        elif value.startswith("--"):
            flags.add(value.split("=", 1)[0])
        else:
            flags.update(value[1:])
    return flags, operands


def _path(word: Word) -> str:
    """A path argument normalised (`//etc/..` is `/`); `~` and `$HOME` kept as `~`."""
    text = _HOME.sub("/~", word.loose) if _HOME.match(word.loose) else word.loose
    if not text.startswith("/"):
        return text
    return "/" + posixpath.normpath(text).lstrip("/")


def _braces(text: str, limit: int = 64) -> list[str]:
    """`text` with its brace lists expanded as bash does (`/{usr,etc}`: `/usr`, `/etc`),
    at most `limit` results (the rest is not read: enough to find `/` among them)."""
    out, todo = [], [text]
    while todo and len(out) < limit:
        word = todo.pop()
        found = _BRACE.search(word)
        if found is None:
            out.append(word)
            continue
        head, tail = word[: found.start()], word[found.end() :]
        todo.extend(head + part + tail for part in found.group(1).split(","))
    return out


def _everything(word: Word) -> bool:
    """`/`, home or a system directory, or all that is in one (`/*`, `~/*`), whichever of
    its brace expansions (`/{usr,}`) it is."""
    return any(_everything_path(Word(text, text)) for text in _braces(word.loose))


def _everything_path(word: Word) -> bool:
    path = _path(word)
    if not path.startswith("/"):
        return False
    for suffix in ("/*", "/.*"):
        if path.endswith(suffix):
            path = path[: -len(suffix)] or "/"
    if path == "/":
        return True
    parent, name = posixpath.split(path)
    if parent != "/":
        return False
    if _GLOB.search(name):
        return any(fnmatchcase(d, name) for d in _SYSTEM_DIRS)
    return name in _SYSTEM_DIRS or name == "~"


def _simple(call: Call, line: Line) -> Simple:
    return line.simples[call.simple]


def _each(check: Callable[[Call, Line], bool]) -> Callable[[Line], bool]:
    """A rule on the line from a rule on one program: true if it holds for any."""
    return lambda line: any(check(call, line) for call in line.calls)


def _words_of(line: Line) -> Iterator[tuple[Simple, Word]]:
    for simple in line.simples:
        for word in simple.words:
            yield simple, word
        for redirect in simple.redirects:
            if redirect.op != "<<":
                yield simple, redirect.target


# --- hard blocks ------------------------------------------------------------------


def _rm_recursive(call: Call) -> list[Word]:
    """The operands of a recursive `rm` (none for any other command)."""
    if call.program != "rm":
        return []
    flags, operands = _options(call.args)
    return operands if flags & {"r", "R", "--recursive"} else []


def _rm_everything(call: Call, line: Line) -> bool:
    return any(_everything(w) for w in _rm_recursive(call))


def _rm_printed(call: Call, line: Line) -> bool:
    """A recursive rm of what a command prints (`rm -rf $(echo /)`): it cannot be judged."""
    return any("$(" in w.text or "`" in w.text for w in _rm_recursive(call))


def _mkfs(call: Call, line: Line) -> bool:
    program = call.program or ""
    return program in ("mkfs", "mke2fs") or program.startswith("mkfs.")


def _dd_disk(call: Call, line: Line) -> bool:
    if call.program != "dd":
        return False
    targets = [a.value[3:] for a in call.args if a.value and a.value.startswith("of=")]
    return any(_RAW_DISK.match(_path(Word(t, t))) for t in targets)


def _writes_disk(line: Line) -> bool:
    for simple in line.simples:
        if any(r.writes and _RAW_DISK.match(_path(r.target)) for r in simple.redirects):
            return True
    for call in line.calls:
        if call.program in ("tee", "cp"):
            _, operands = _options(call.args)
            targets = operands if call.program == "tee" else operands[-1:]
            if any(_RAW_DISK.match(_path(w)) for w in targets):
                return True
    return False


def _fork_bomb(call: Call, line: Line) -> bool:
    """A function that runs itself in a pipeline or in the background."""
    simple = _simple(call, line)
    if simple.function is None or call.program != simple.function:
        return False
    return simple.pipe is not None or simple.background


def _kill_all(call: Call, line: Line) -> bool:
    if call.program != "kill":
        return False
    values = [a.value for a in call.args]
    if values == ["-1"]:
        return True
    i = 0
    if values and values[0] in ("-s", "-n", "--signal"):
        i = 2
    elif values and values[0] is not None and values[0].startswith("-") and values[0] != "--":
        i = 1  # the signal (-9, -KILL, -SIGTERM, and -1 is SIGHUP here)
    return "-1" in values[i:]


def _shutdown(call: Call, line: Line) -> bool:
    program = call.program
    values = [a.value for a in call.args]
    if program in ("shutdown", "reboot", "halt", "poweroff"):
        return True
    if program in ("init", "telinit"):
        return bool(set(values) & {"0", "6"})
    return program == "systemctl" and bool(set(values) & {"poweroff", "reboot", "halt", "kexec"})


HARD_BLOCKS: tuple[Rule, ...] = (
    ("recursive rm of /, home or a system directory", _each(_rm_everything)),
    ("making a filesystem", _each(_mkfs)),
    ("dd onto a raw disk", _each(_dd_disk)),
    ("writing onto a raw disk", _writes_disk),
    ("a fork bomb", _each(_fork_bomb)),
    ("kill -1 (every process)", _each(_kill_all)),
    ("shutting down or rebooting the machine", _each(_shutdown)),
)


# --- needs approval: one program --------------------------------------------------


def _as_root(call: Call, line: Line) -> bool:
    return call.program in _AS_ROOT


def _chmod_system(call: Call, line: Line) -> bool:
    if call.program not in ("chmod", "chown", "chgrp"):
        return False
    flags, operands = _options(call.args)
    if not flags & {"R", "--recursive"}:
        return False
    for word in operands:
        path = _path(word)
        if path == "/" or (path.startswith("/") and path.split("/")[1] in _CHMOD_DIRS):
            return True
    return False


def _git_push(call: Call) -> tuple[set[str], list[str]] | None:
    """`git [global options] push ...`: the push's flags and operands, else None."""
    if call.program != "git":
        return None
    args = [a.value for a in call.args]
    i = 0
    while i < len(args) and (args[i] or "").startswith("-"):
        i += 2 if args[i] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") else 1
    if i >= len(args) or args[i] != "push":
        return None
    flags: set[str] = set()
    operands: list[str] = []
    for value in args[i + 1 :]:
        if value is None or not value.startswith("-"):
            operands.append(value or "")
        elif value.startswith("--"):
            flags.add(value.split("=", 1)[0])
        else:
            flags.update(value[1:].split("o", 1)[0])  # -o takes a value
    return flags, operands


def _force_push(call: Call, line: Line) -> bool:
    push = _git_push(call)
    if push is None:
        return False
    flags, operands = push
    forced = {"f", "--force", "--force-with-lease", "--force-if-includes", "--mirror"}
    return bool(flags & forced) or any(o.startswith("+") for o in operands[1:])


def _push_delete(call: Call, line: Line) -> bool:
    push = _git_push(call)
    if push is None:
        return False
    flags, operands = push
    deleting = {"d", "--delete", "--prune"}
    return bool(flags & deleting) or any(o.startswith(":") and len(o) > 1 for o in operands[1:])


def _drop(line: Line) -> bool:
    for simple in line.simples:
        texts = [w.loose for w in simple.words] + [r.target.loose for r in simple.redirects]
        if _DROP.search(" ".join(texts)):
            return True
    return False


def _expansion_named(call: Call, line: Line) -> bool:
    return call.program is None


# --- needs approval: downloads run, secrets sent --------------------------------------


def _downloads(line: Line) -> Iterator[tuple[int, Call]]:
    for index, simple in enumerate(line.simples):
        for call in simple.calls:
            if call.program in _DOWNLOADERS:
                yield index, call


def _reads_stdin_program(call: Call) -> bool:
    """An interpreter (or `source`) that takes its program from stdin."""
    code = code_of(call)
    if code is None:
        return False
    if code.kind == "file" and code.word is not None:
        return code.word.loose in STDIN_FILES
    return code.kind == "stdin"


def _up(line: Line, index: int) -> Iterator[int]:
    """`index`, then the simple commands whose words hold it, outwards."""
    seen: set[int] = set()
    current: int | None = index
    while current is not None and current not in seen:
        seen.add(current)
        yield current
        current = line.simples[current].inside


def _piped_into_interpreter(line: Line) -> bool:
    last: dict[int, int] = {}  # pipeline -> its last stage that runs a program read on stdin
    for simple in line.simples:
        if simple.pipe is not None and any(_reads_stdin_program(c) for c in simple.calls):
            last[simple.pipe[0]] = max(last.get(simple.pipe[0], -1), simple.pipe[1])
    for index, _ in _downloads(line):
        for at in _up(line, index):
            pipe = line.simples[at].pipe
            if pipe is not None and pipe[1] < last.get(pipe[0], -1):
                return True
    return False


def _substituted_into_interpreter(line: Line) -> bool:
    """`bash <(curl ...)`, `sh -c "$(curl ...)"`, `eval "$(wget -O- ...)"`, `. <(curl)`."""
    for index, _ in _downloads(line):
        for at in _up(line, index):
            simple = line.simples[at]
            if simple.inside is None or simple.inside_word is None:
                continue
            word, holder = simple.inside_word, line.simples[simple.inside]
            for call in holder.calls:
                code = code_of(call)
                if code is None:
                    continue
                if code.word is word or (call.program == "eval" and word in call.args):
                    return True
                fed = any(r.target is word and r.op in ("<", "<<<", "<<") for r in holder.redirects)
                if fed and code.kind == "stdin":
                    return True
    return False


def _basename(text: str) -> str:
    return text.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


def _written(call: Call, simple: Simple, line: Line) -> set[str]:
    """Names of the files a download writes ("*" when it cannot be told)."""
    names: set[str] = set()
    args = call.args
    urls = [_basename(a.loose) for a in args if "://" in a.loose]
    remote_name = False
    for i, arg in enumerate(args):
        value = arg.value
        if value is None or not value.startswith("-") or value == "-":
            continue
        nxt = args[i + 1] if i + 1 < len(args) else None
        if value.startswith("--"):
            name, eq, rest = value.partition("=")
            if name in ("--output", "--output-document"):
                target = rest if eq else (nxt.value if nxt else None)
                names.add("*" if target is None else target)
            remote_name |= name in ("--remote-name", "--remote-name-all")
            continue
        letters = value[1:]
        file_letter = "o" if call.program == "curl" else "O"
        for j, letter in enumerate(letters):
            if letter == file_letter:
                rest = letters[j + 1 :]
                target = rest or (nxt.value if nxt else None)
                names.add("*" if target is None else target)
                break
            if call.program == "curl" and letter == "O":
                remote_name = True
    if call.program == "wget" and not names:
        remote_name = True
    if remote_name:
        names.update(urls or ["*"])
    for redirect in simple.redirects:
        if redirect.writes:
            names.add(redirect.target.value or "*")
    for later in line.later(simple):  # curl ... | tee FILE
        for tee in later.calls:
            if tee.program == "tee":
                names.update(w.value or "*" for w in _options(tee.args)[1])
    return {"*" if n == "*" else _basename(n) for n in names if n != "-"}


def _runs_file(call: Call, simple: Simple, line: Line, names: set[str]) -> bool:
    def named(word: Word) -> bool:
        return "*" in names or word.value is None or _basename(word.loose) in names

    if "/" in call.name.loose and named(call.name):  # ./install.sh
        return True
    code = code_of(call)
    if code is None:
        return False
    if code.kind == "file" and code.word is not None:
        return code.word.loose not in STDIN_FILES and named(code.word)
    if code.kind != "stdin":
        return False
    if any(r.op == "<" and named(r.target) for r in simple.redirects):
        return True
    before = shell_input(simple, line)
    return before is not None and any(
        c.program == "cat" and any(named(w) for w in _options(c.args)[1]) for c in before.calls
    )


def _runs_a_downloaded_file(line: Line) -> bool:
    names: set[str] = set()  # what the downloads so far wrote
    for simple in line.simples:
        if names and any(_runs_file(c, simple, line, names) for c in simple.calls):
            return True
        for call in simple.calls:
            if call.program in _DOWNLOADERS:
                names |= _written(call, simple, line)
    return False


def _is_secret(word: Word) -> bool:
    """A secret file: HERMES_HOME's (not its workspace), `.env`, keys, shadow, ..."""
    text = word.loose
    if "HERMES_HOME" in text:
        return "workspace" not in text
    text = _VALUE_OF.split(text)[-1]  # -d @file, -F f=<file, --data-binary=@f, if=file
    path = _path(Word(text, text))
    if path.startswith("/~"):
        path = str(Path.home()) + path[2:]
    home = str(default_home())
    if path == home or path.startswith(home + "/"):
        return not path.startswith(home + "/workspace/")
    parts = [p for p in path.split("/") if p]
    if not parts:
        return False
    name = parts[-1]
    if ".hermes" in parts:
        after = parts[parts.index(".hermes") + 1 :]
        return not after or after[0] != "workspace"
    if ".ssh" in parts:
        return not name.endswith(".pub") and name not in ("known_hosts", "authorized_keys")
    if ".gnupg" in parts or parts[-2:] == [".aws", "credentials"]:
        return True
    if name in _SECRET_NAMES or (name.startswith(".env.") and not _NOT_SECRET_ENV.match(name)):
        return True
    if path in _SECRET_PATHS:
        return True
    return len(parts) == 3 and parts[0] == "proc" and name == "environ"


_SSH_OWN = ("-i", "-F", "-o")
# Options whose value is a file the program does not send: ssh's key and config, where
# a download writes.
_NOT_SENT: dict[str, tuple[str, ...]] = {
    "ssh": _SSH_OWN,
    "scp": _SSH_OWN,
    "sftp": _SSH_OWN,
    "rsync": ("-e", "--rsh"),
    "curl": ("-o", "--output", "-c", "--cookie-jar", "-D", "--dump-header"),
    "wget": ("-O", "--output-document", "-o", "--output-file", "-a", "--append-output"),
}


def _not_sent(line: Line) -> set[int]:
    """ids of words that name a file a network program does not send (`ssh -i KEY`)."""
    skip: set[int] = set()
    for call in line.calls:
        options = _NOT_SENT.get(call.program or "", ())
        for i, arg in enumerate(call.args):
            value = arg.value or ""
            if value in options and i + 1 < len(call.args):
                skip.add(id(call.args[i + 1]))
            elif any(value.startswith(o + "=" if o.startswith("--") else o) for o in options):
                skip.add(id(arg))
    return skip


def _remote(word: Word) -> bool:
    """`host:path`, `user@host:`, `rsync://...`: an operand of scp or rsync on another host."""
    return "://" in word.loose or bool(_REMOTE.match(word.loose))


def _sends_out(line: Line) -> bool:
    for call in line.calls:
        if call.program in _NETWORK or _git_push(call) is not None:
            return True
        if call.program in _COPIERS and any(_remote(w) for w in _options(call.args)[1]):
            return True
    return any("/dev/tcp/" in w.loose or "/dev/udp/" in w.loose for _, w in _words_of(line))


def _secret_sent(line: Line) -> bool:
    if not _sends_out(line):
        return False
    skip = _not_sent(line)
    return any(
        id(word) not in skip and _is_secret(word)
        for simple, word in _words_of(line)
        if not any(r.target is word and r.writes for r in simple.redirects)
    )


def _shell_fed_unknown(line: Line) -> bool:
    """A shell reading commands another program prints (not echo, printf, a heredoc,
    a file): what it runs cannot be seen."""
    for simple in line.simples:
        before = shell_input(simple, line)
        if before is None or any(r.op in ("<<", "<<<", "<") for r in simple.redirects):
            continue
        if not any(c.program in SHELLS and _reads_stdin_program(c) for c in simple.calls):
            continue
        feeder = before.calls[-1] if before.calls else None
        if feeder is None or feeder.program in ("echo", "printf"):
            continue
        if feeder.program == "cat":
            continue  # a file (a download's is caught elsewhere) or a heredoc, read above
        return True
    return False


NEEDS_APPROVAL: tuple[Rule, ...] = (
    ("piping a download into a shell or an interpreter", _piped_into_interpreter),
    (
        "running a download through a substitution (like bash <(curl ...))",
        _substituted_into_interpreter,
    ),
    ("running a downloaded file with a shell or an interpreter", _runs_a_downloaded_file),
    (
        "sending a secret out: a secret file is read and sent to the network in one command",
        _secret_sent,
    ),
    ("a shell runs commands another program prints, which cannot be judged", _shell_fed_unknown),
    ("running as root with sudo, doas or su", _each(_as_root)),
    ("recursive chmod or chown of a system path", _each(_chmod_system)),
    ("a recursive rm of what a command prints, which cannot be judged", _each(_rm_printed)),
    ("force-pushing over history", _each(_force_push)),
    ("deleting remote branches with git push", _each(_push_delete)),
    ("dropping a database", _drop),
    (
        "the program to run is given by an expansion ($X, $(...)), so it cannot be judged",
        _each(_expansion_named),
    ),
)
UNPARSED = "the command could not be parsed, so what it runs cannot be judged"
TOO_LONG = f"the command is longer than {MAX_CHARS} characters, too long to judge"
TOO_MANY = f"the command runs more than {MAX_COMMANDS} commands, too many to judge"


# --- never ending in the foreground ---------------------------------------------------


def _nohup(call: Call, line: Line) -> bool:
    return call.program == "nohup"


def _follows(call: Call, line: Line) -> bool:
    if call.program != "tail":
        return False
    for arg in call.args:
        value = arg.value or ""
        if value.startswith("--follow"):
            return True
        if value.startswith("-") and not value.startswith("--"):
            letters = re.split(r"[ncs]", value[1:], maxsplit=1)[0]  # -n/-c/-s take values
            if "f" in letters or "F" in letters:
                return True
    return False


def _repeats(call: Call, line: Line) -> bool:
    return call.program == "watch" and bool(call.args)


_DEV_SCRIPTS = frozenset({"dev", "start", "serve"})


def _dev_server(call: Call, line: Line) -> bool:
    program = call.program
    values = [a.value or "" for a in call.args]
    first = next((v for v in values if not v.startswith("-")), "")
    if program in ("npm", "pnpm", "yarn", "bun"):
        operands = [v for v in values if not v.startswith("-")]
        if operands[:1] in (["run"], ["run-script"]):
            operands = operands[1:]
        return operands[:1] != [] and operands[0] in _DEV_SCRIPTS
    if program == "vite":
        return first not in ("build", "optimize")
    if program in ("uvicorn", "gunicorn", "hypercorn"):
        return True
    if program is not None and _PYTHON.fullmatch(program):
        joined = " ".join(values)
        if re.search(r"(?:^|\s)-m\s*(?:http\.server|uvicorn|gunicorn|flask\s+run)", joined):
            return True
        return "runserver" in values and any(v.endswith("manage.py") for v in values)
    if program == "manage.py":
        return first == "runserver"
    if program == "flask":
        return first == "run"
    if program == "rails":
        return first in ("s", "server")
    if program == "jupyter":
        return first in ("notebook", "lab")
    if program in ("docker", "docker-compose", "podman"):
        words = values if program == "docker-compose" else values[1:]
        if program != "docker-compose" and values[:1] != ["compose"]:
            return False
        return "up" in words and not ({"-d", "--detach"} & set(words))
    return False


NEVER_ENDING: tuple[Rule, ...] = (
    ("it starts a process in the background with &", lambda line: line.background),
    ("it uses nohup", _each(_nohup)),
    ("it follows a file forever", _each(_follows)),
    ("it repeats forever", lambda line: line.loops_forever or _each(_repeats)(line)),
    ("it starts a development server", _each(_dev_server)),
)


# --- the verdict ----------------------------------------------------------------------


@attrs.frozen
class Verdict:
    """allow, block, approve (needs a human yes), or background (refused in the foreground)."""

    action: str
    reason: str = ""


ALLOW = Verdict("allow")


def _first(rules: Sequence[Rule], line: Line) -> str | None:
    return next((reason for reason, check in rules if check(line)), None)


def judge(command: str, background: bool = False, approved: bool = False) -> Verdict:
    """The guard's verdict on `command`: hard blocks always, approval rules unless an
    owner `approved` it, never-ending rules unless it runs in the `background`."""
    if not command.strip():
        return ALLOW
    if len(command) > MAX_CHARS and not approved:
        return Verdict("approve", TOO_LONG)
    line = read_line(command, limit=None if approved else MAX_COMMANDS)
    if reason := _first(HARD_BLOCKS, line):
        return Verdict("block", reason)
    if not approved:
        if line.truncated:
            return Verdict("approve", TOO_MANY)
        if reason := _first(NEEDS_APPROVAL, line):
            return Verdict("approve", reason)
        if line.unjudged:
            return Verdict("approve", line.unjudged[0])
        if line.unparsed is not None:
            return Verdict("approve", UNPARSED)
    if not background and (reason := _first(NEVER_ENDING, line)):
        return Verdict("background", reason)
    return ALLOW
