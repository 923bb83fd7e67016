"""Bringing a skill in from outside (`hermes skills install`): `fetch_skill` copies,
unpacks, clones or downloads what a source names into a fresh directory, where the scan
and the quarantine that come next find it.

Nothing fetched is trusted yet, so nothing fetched may write or lead outside that
directory: an archive member with an absolute or climbing name, a hard link, a device or
a FIFO, or one that would be written through a symlink is refused, and an archive may
make at most MAX_MEMBERS members, MAX_FILE_BYTES per file and MAX_TOTAL_BYTES in all,
counted as the bytes are written (an archive's headers may lie). Whatever the source (a
copied directory, an archive, a clone), the fetched tree is checked last: a symlink to an
absolute path or one resolving (directly or through other links) outside the skill is
refused, and a clone is held to the same caps.

What is fetched over the network obeys web_fetch's address rules (public addresses only
unless `web.allow_private` lists them): a download on every redirect, within
MAX_DOWNLOAD_BYTES; a git remote's host before the clone, which then connects (over
http(s)) to the very addresses judged and follows no redirect. A local source (a path,
file://) is the operator's own machine and is not judged. A failure leaves nothing behind.
"""

from __future__ import annotations

import gzip
import lzma
import os
import posixpath
import shutil
import signal
import socket
import stat
import subprocess
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path, PurePosixPath
from typing import IO
from urllib.parse import unquote, urlsplit

import attrs
import httpx
import trio

from hermes.actors.errors import Invalid
from hermes.agent.tools.base import ToolError
from hermes.agent.tools.web_fetch import GuardedTransport, checked_url, follow, media_type_of
from hermes.terminal.addresses import AddressRefused, AllowList, allowed_addresses

MB = 2**20
MAX_MEMBERS = 1000  # entries an archive (or a copied directory) may hold
MAX_FILE_BYTES = 10 * MB  # one file, as written
MAX_TOTAL_BYTES = 50 * MB  # every file together, as written
MAX_DOWNLOAD_BYTES = 20 * MB  # an archive fetched over http(s)
MAX_LINK_BYTES = 4096  # a zip symlink's target (its member's content)
DOWNLOAD_SECONDS = 120.0
CLONE_SECONDS = 120.0
CHUNK = 64 * 1024
FETCHED = "fetched"  # the directory made under `into`
DOWNLOAD = ".download"  # a downloaded archive, under `into` until unpacked
USER_AGENT = "hermes-skills/1"
ARCHIVE_SUFFIXES = {".tar.gz": "tar", ".tgz": "tar", ".tar": "tar", ".zip": "zip"}
ARCHIVE_TYPES = {
    "application/zip": "zip",
    "application/x-zip": "zip",
    "application/x-zip-compressed": "zip",
    "application/gzip": "tar",
    "application/x-gzip": "tar",
    "application/x-tar": "tar",
    "application/x-gtar": "tar",
    "application/x-tgz": "tar",
    "application/x-compressed-tar": "tar",
}
GIT_PREFIXES = ("ssh://", "git://", "file://")
GIT_PORTS = {"http": 80, "https": 443, "git": 9418, "ssh": 22}
GIT_PROTOCOLS = ("https", "http", "ssh", "git")  # a remote clone's (file: a local one's too)
ALLOW_HINT = "an owner can let hermes reach it by listing it in config.yaml under web.allow_private"
ACCEPTED = (
    "a skill directory; a .tar.gz, .tgz, .tar or .zip file; a git repository (a URL ending"
    " .git or starting git@, ssh://, git://, git+https:// or file://, or a bare repository's"
    " path); or an http(s) URL of a .tar.gz, .tgz, .tar or .zip archive"
)
# What reading a corrupt or unreadable archive raises (gzip's and bz2's are OSErrors).
ARCHIVE_ERRORS = (
    tarfile.TarError,
    zipfile.BadZipFile,
    EOFError,
    zlib.error,
    lzma.LZMAError,
    gzip.BadGzipFile,
    NotImplementedError,  # a zip compression method zipfile lacks
    RuntimeError,  # an encrypted zip member
    OSError,
)


class SkillSourceError(Invalid):
    """A skill source that cannot be installed: the message names the source and the problem."""


def fetch_skill(source: str, into: Path, *, allow_private: AllowList | None = None) -> Path:
    """Copy the skill named by `source` into a new directory under `into` (which exists and
    is empty, private to hermes) and return the skill's directory: the one holding
    SKILL.md, the top of what was fetched or its only top-level directory. Blocking (the
    CLI calls it directly); on any failure what it wrote under `into` is removed."""
    top = into / FETCHED
    download = into / DOWNLOAD
    for path in (top, download):
        if os.path.lexists(path):  # not ours to remove on a failure
            raise FileExistsError(f"{path} exists; fetch_skill needs an empty directory")
    try:
        allow = AllowList() if allow_private is None else allow_private
        fetch_into(source.strip(), top, download, allow)
        skill = skill_dir(top, source)
        check_tree(top, skill, source)  # whatever brought it: a copy, an archive, git
        return skill
    except BaseException:
        remove(download)
        remove(top)
        raise


def fetch_into(source: str, top: Path, download: Path, allow: AllowList) -> None:
    """Bring what `source` names to `top`, by the first kind of source it is."""
    path = local_path(source)
    if path is not None and path.is_dir():
        if is_bare_repository(path):
            clone(path.resolve().as_uri(), top, source, local=True, pinned=[])
        else:
            skill_dir(path, source, skip=(".git",))  # refused before anything is copied
            copy_dir(path, top, source)
    elif path is not None and path.is_file():
        kind = archive_kind(path.name)
        if kind is None:
            raise SkillSourceError(f"{source} is a file but not an archive; accepted: {ACCEPTED}")
        unpack(path, kind, top, source)
    elif (url := git_url(source)) is not None:
        local = url.lower().startswith("file://")  # the operator's own machine: not judged
        clone(url, top, source, local=local, pinned=[] if local else guarded(url, source, allow))
    elif source.lower().startswith(("http://", "https://")):
        try:
            kind = trio.run(download_archive, source, download, allow)
        except ToolError as exc:  # the address guard's refusal, a failed request
            raise SkillSourceError(f"cannot download {source}: {exc}") from exc
        unpack(download, kind, top, source)
        download.unlink()
    elif path is not None:
        raise SkillSourceError(f"{source}: no such file or directory; accepted: {ACCEPTED}")
    else:
        raise SkillSourceError(
            f"cannot install {source!r}: not a source hermes takes; accepted: {ACCEPTED}"
        )


def local_path(source: str) -> Path | None:
    """`source` as a local path, None when it has the form of a URL."""
    if "://" in source or source.startswith("git@") or not source:
        return None
    return Path(source).expanduser()


def git_url(source: str) -> str | None:
    """The URL to give `git clone` if `source` names a git repository by URL."""
    plus = source.lower().startswith("git+")
    url = source[4:] if plus else source
    lower = url.lower()
    if url.startswith("git@") or lower.startswith(GIT_PREFIXES):
        return url
    if lower.startswith(("http://", "https://")) and (
        plus or urlsplit(url).path.rstrip("/").endswith(".git")
    ):
        return url
    return None


def archive_kind(name: str) -> str | None:
    """ "tar" or "zip" by a file name's ending, None if it is not an archive's."""
    lower = name.lower()
    return next((kind for end, kind in ARCHIVE_SUFFIXES.items() if lower.endswith(end)), None)


def is_bare_repository(path: Path) -> bool:
    return (
        not (path / "SKILL.md").exists()
        and (path / "HEAD").is_file()
        and (path / "objects").is_dir()
        and (path / "refs").is_dir()
    )


def is_skill(directory: Path) -> bool:
    manifest = directory / "SKILL.md"
    return manifest.is_file() and not manifest.is_symlink()


def skill_dir(top: Path, source: str, skip: tuple[str, ...] = ()) -> Path:
    """The directory holding SKILL.md: `top` or its only top-level directory (a Mac zip's
    __MACOSX beside it does not count)."""
    if is_skill(top):
        return top
    entries = [e for e in top.iterdir() if e.name not in (*skip, "__MACOSX")]
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        if is_skill(entries[0]):
            return entries[0]
    raise SkillSourceError(
        f"no SKILL.md in {source} (neither at its top nor in its only top-level directory)"
    )


def remove(path: Path) -> None:
    """Remove what was written at `path`, whatever modes a copy gave its directories."""
    if path.is_symlink() or path.is_file():
        path.unlink()
        return
    if not path.exists():
        return
    path.chmod(0o700)
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            child = os.path.join(root, name)
            if not os.path.islink(child):
                os.chmod(child, 0o700)
    shutil.rmtree(path)


@attrs.define
class Budget:
    """What a fetch has made so far, against the caps."""

    source: str
    members: int = 0
    total: int = 0

    def member(self, name: str) -> None:
        self.members += 1
        if self.members > MAX_MEMBERS:
            raise SkillSourceError(
                f"{self.source} holds more than {MAX_MEMBERS} members (the limit), at {name!r}"
            )

    def copy(self, read: Callable[[int], bytes], out: IO[bytes], name: str) -> None:
        """Copy `read`'s bytes to `out`, counting each one against the caps."""
        written = 0
        while chunk := read(CHUNK):
            written += len(chunk)
            self.total += len(chunk)
            if written > MAX_FILE_BYTES:
                raise SkillSourceError(
                    f"{self.source}: {name!r} is larger than the "
                    f"{MAX_FILE_BYTES // MB} MB a file may be"
                )
            if self.total > MAX_TOTAL_BYTES:
                raise SkillSourceError(
                    f"{self.source} unpacks to more than "
                    f"{MAX_TOTAL_BYTES // MB} MB (the limit), at {name!r}"
                )
            out.write(chunk)


def file_mode(executable: bool) -> int:
    """Only the executable bit survives (a script's): never setuid, setgid or sticky."""
    return 0o755 if executable else 0o644


# -- a local directory ------------------------------------------------------------------


def copy_dir(src: Path, top: Path, source: str) -> None:
    """Copy `src` to `top`, symlinks as symlinks (never followed), without `.git`, within
    the caps; a FIFO, device or socket is refused (reading a FIFO would wait for ever)."""
    budget = Budget(source)

    def ignore(directory: str, names: list[str]) -> set[str]:
        for name in names:
            if name != ".git":
                budget.member(os.path.join(directory, name))
        return {".git"} & set(names)

    def copy_file(from_path: str, to_path: str) -> None:
        try:
            fd = os.open(from_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as stream:
                mode = os.fstat(stream.fileno()).st_mode
                if not stat.S_ISREG(mode):
                    raise SkillSourceError(
                        f"{source}: {from_path} is not a regular file, directory or symlink"
                    )
                with open(to_path, "xb") as out:
                    budget.copy(stream.read, out, from_path)
            os.chmod(to_path, file_mode(bool(mode & 0o111)))
        except OSError as exc:  # copytree would collect it and go on
            raise SkillSourceError(f"cannot copy {from_path}: {exc}") from exc

    try:
        shutil.copytree(src, top, symlinks=True, ignore=ignore, copy_function=copy_file)
    except shutil.Error as exc:
        first = exc.args[0][0] if exc.args and exc.args[0] else exc
        raise SkillSourceError(f"cannot copy {source}: {first}") from exc
    except OSError as exc:
        raise SkillSourceError(f"cannot copy {source}: {exc}") from exc
    for root, dirs, _files in os.walk(top):  # copytree gave each directory its source's mode
        os.chmod(root, 0o755)
        for name in dirs:
            if not os.path.islink(os.path.join(root, name)):
                os.chmod(os.path.join(root, name), 0o755)


# -- git --------------------------------------------------------------------------------


def remote_host(url: str, source: str) -> tuple[str, int]:
    """The host a remote git URL connects to, and its port."""
    if url.startswith("git@"):  # scp-like: git@host:path or git@[v6]:path
        rest = url[4:]
        host = rest[1 : rest.find("]")] if rest.startswith("[") else rest.partition(":")[0]
        port = GIT_PORTS["ssh"]
    else:
        parts = urlsplit(url)
        try:
            host, port = parts.hostname or "", parts.port or GIT_PORTS[parts.scheme.lower()]
        except ValueError as exc:  # a port that is not a number
            raise SkillSourceError(f"cannot clone {source}: {exc}") from exc
    if not host:
        raise SkillSourceError(f"cannot clone {source}: it names no host")
    return host, port


def guarded(url: str, source: str, allow: AllowList) -> list[str]:
    """Refuse a remote repository unless every address its host resolves to is public or
    `allow` lets it through (web_fetch's rules, hermes.terminal.addresses); the git options
    that make an http(s) clone connect to the very addresses judged, not to a second
    lookup's answer."""
    host, port = remote_host(url, source)
    try:
        literals = trio.run(allowed_addresses, host, port, allow)
    except socket.gaierror as exc:
        raise SkillSourceError(
            f"cannot clone {source}: cannot resolve {host}: {exc.strerror}"
        ) from exc
    except AddressRefused as exc:
        raise SkillSourceError(f"cannot clone {source}: {exc}; {ALLOW_HINT}") from None
    if not url.lower().startswith(("http://", "https://")) or host in literals:
        return []  # git:// and ssh resolve on their own; an address needs no resolving
    try:
        name = host.encode("idna").decode("ascii")  # as curl looks it up
    except UnicodeError:
        name = host
    addresses = ",".join(f"[{a}]" if ":" in a else a for a in literals)
    return ["-c", f"http.curloptResolve={name}:{port}:{addresses}"]


def clone(url: str, top: Path, source: str, *, local: bool, pinned: list[str]) -> None:
    """`git clone --depth 1` of `url` into `top`, without prompts, submodules, redirects
    (one could lead to a private address) or a proxy (it would connect past the check),
    by the protocols named only (never ext::, file:// only for a local source), within
    CLONE_SECONDS (every process git started is killed past it), then `.git` removed.
    `pinned`: more git options (`guarded`'s)."""
    command = ["git", "-c", "http.followRedirects=false", "-c", "http.proxy=", *pinned]
    for protocol in GIT_PROTOCOLS + (("file",) if local else ()):
        command += ["-c", f"protocol.{protocol}.allow=always"]
    command += ["-c", "protocol.allow=never"]
    command += ["clone", "--depth", "1", "--no-recurse-submodules", "--quiet", "--", url, str(top)]
    env = {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/true",
        "GIT_LFS_SKIP_SMUDGE": "1",  # no large-file downloads behind the caps' back
    }
    try:
        # A session of its own: no terminal for ssh to prompt on, one group to kill.
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise SkillSourceError(f"cannot clone {source}: git is not installed") from exc
    try:
        _, err = process.communicate(timeout=CLONE_SECONDS)
    except subprocess.TimeoutExpired:
        kill_group(process)
        raise SkillSourceError(
            f"cannot clone {source}: it took longer than {CLONE_SECONDS:g} s"
        ) from None
    except BaseException:
        kill_group(process)
        raise
    if process.returncode != 0:
        # git's first fatal line names the cause; its last lines are often generic advice
        # ("Please make sure you have the correct access rights ...").
        lines = [line.strip() for line in err.decode(errors="replace").splitlines()]
        lines = [line for line in lines if line]
        fatal = [line for line in lines if line.startswith(("fatal:", "error:"))]
        why = (fatal or lines or [f"git exited with status {process.returncode}"])[0]
        raise SkillSourceError(f"cannot clone {source}: {why}")
    remove(top / ".git")


def kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.communicate()


def check_tree(top: Path, skill: Path, source: str) -> None:
    """The last check of what was fetched, whatever brought it. Every symlink leads inside:
    it names no absolute path and resolves (through any other links) inside the skill's
    directory, which is what is installed, or inside `top` for one beside it (a zip's
    __MACOSX). The tree is within the caps an archive has, counted after the fact (git
    wrote it; a copy or an unpacking counted as it wrote and passes again): its files and
    links, never more than the members a copy or an archive counted."""
    budget = Budget(source)
    real_top, real_skill = os.path.realpath(top), os.path.realpath(skill)
    for root, dirs, files in os.walk(top):
        real_root = os.path.realpath(root)
        in_skill = within(real_root, real_skill)
        bound, where = (real_skill, "the skill") if in_skill else (real_top, "what was fetched")
        for name in dirs + files:
            path = os.path.join(root, name)
            rel = Path(path).relative_to(top).as_posix()
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode):  # git makes no directory without a file in it
                budget.member(rel)
            if stat.S_ISLNK(st.st_mode):
                check_landing(path, rel, bound, where, source)
            elif stat.S_ISREG(st.st_mode):
                budget.total += st.st_size
                if st.st_size > MAX_FILE_BYTES:
                    raise SkillSourceError(
                        f"{source}: {rel!r} is larger than the "
                        f"{MAX_FILE_BYTES // MB} MB a file may be"
                    )
                if budget.total > MAX_TOTAL_BYTES:
                    raise SkillSourceError(
                        f"{source} is larger than {MAX_TOTAL_BYTES // MB} MB (the limit)"
                    )


def check_landing(path: str, rel: str, bound: str, where: str, source: str) -> None:
    """The symlink at `path` names no absolute path and resolves inside `bound` (a real
    path, `where` in words)."""
    target = os.readlink(path)
    if target.startswith("/"):
        why = f"it names the absolute path {target!r}"
    elif not within(os.path.realpath(path), bound):
        why = f"it leads to {target!r}, outside {where}"
    else:
        return
    raise SkillSourceError(f"{source}: refused the symlink {rel!r}: {why}")


def within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


# -- a download -------------------------------------------------------------------------


async def download_archive(url: str, to: Path, allow: AllowList) -> str:
    """GET the archive at `url` into the file `to`, as web_fetch's `fetch` GETs a page
    (its guarded transport, no proxy, each redirect checked) but with the body saved as
    sent, at most MAX_DOWNLOAD_BYTES of it, within DOWNLOAD_SECONDS; the archive's kind."""
    try:
        first = checked_url(httpx.URL(url))
    except httpx.InvalidURL as exc:
        raise SkillSourceError(f"{url!r} is not a URL ({exc})") from exc
    async with httpx.AsyncClient(
        transport=GuardedTransport(allow),
        trust_env=False,  # an environment proxy would connect for us, past the guard
        timeout=None,  # the one deadline is DOWNLOAD_SECONDS, over the whole download
        headers={"user-agent": USER_AGENT, "accept-encoding": "identity"},
    ) as client:
        with trio.move_on_after(DOWNLOAD_SECONDS):
            request = client.build_request("GET", first)
            return await follow(client, request, partial(save, to=to, url=url))
    raise SkillSourceError(f"downloading {url} took longer than {DOWNLOAD_SECONDS:g} s")


async def save(response: httpx.Response, to: Path, url: str) -> str:
    """Write the final response's body (as sent: no decoding) to `to`; the archive's kind,
    by the URL's path (asked for or arrived at) or else the content type."""
    if response.status_code != 200:
        raise SkillSourceError(
            f"cannot download {url}: {response.url} answered "
            f"{response.status_code} {response.reason_phrase}"
        )
    media_type = media_type_of(response)
    kind = (
        archive_kind(unquote(urlsplit(url).path))
        or archive_kind(unquote(response.url.path))
        or ARCHIVE_TYPES.get(media_type)
    )
    if kind is None:
        raise SkillSourceError(
            f"{url} is not an archive ({media_type or 'no content type'}); accepted: {ACCEPTED}"
        )
    too_big = f"{url} is larger than the {MAX_DOWNLOAD_BYTES // MB} MB a download may be"
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_DOWNLOAD_BYTES:  # refused before any byte
        raise SkillSourceError(too_big)
    written = 0
    async with await trio.open_file(to, "xb") as out:
        async for chunk in response.aiter_raw():
            written += len(chunk)
            if written > MAX_DOWNLOAD_BYTES:
                raise SkillSourceError(too_big)
            await out.write(chunk)
    return kind


# -- unpacking --------------------------------------------------------------------------


@attrs.frozen
class Member:
    """An archive's entry, whichever the archive's format."""

    name: str
    kind: str  # "file", "dir" or "symlink"
    executable: bool = False
    target: str = ""  # a symlink's
    open: Callable[[], IO[bytes]] | None = None  # a file's content


def unpack(archive: Path, kind: str, top: Path, source: str) -> None:
    """Unpack `archive` into the new directory `top`, member by member, refusing any that
    could reach outside it and counting what is written against the caps."""
    top.mkdir(mode=0o755)
    budget = Budget(source)
    members = tar_members if kind == "tar" else zip_members
    try:
        with members(archive, top, source) as entries:
            for member in entries:
                place(member, top, budget)
    except ARCHIVE_ERRORS as exc:
        raise SkillSourceError(f"cannot unpack {source}: {exc or type(exc).__name__}") from exc


def refuse(source: str, name: str, why: str) -> SkillSourceError:
    return SkillSourceError(f"{source}: refused the member {name!r}: {why}")


@contextmanager
def tar_members(archive: Path, top: Path, source: str) -> Iterator[Iterator[Member]]:
    with tarfile.open(archive, "r:*") as tar:
        yield (tar_member(tar, info, top, source) for info in tar)  # headers read lazily


def tar_member(tar: tarfile.TarFile, info: tarfile.TarInfo, top: Path, source: str) -> Member:
    name = info.name
    if info.islnk():
        raise refuse(source, name, "a hard link")
    if info.ischr() or info.isblk() or info.isfifo():
        raise refuse(source, name, "a device or FIFO")
    if not (info.isreg() or info.isdir() or info.issym()):
        raise refuse(source, name, f"an entry of tar type {info.type!r}")
    member_parts(name, source)
    if info.issym():
        check_link(name, info.linkname, source)
    if hasattr(tarfile, "data_filter"):  # Python's own rules too, where it has them
        try:
            tarfile.data_filter(info, str(top))
        except tarfile.FilterError as exc:
            raise refuse(source, name, str(exc)) from exc
    if info.isdir():
        return Member(name, "dir")
    if info.issym():
        return Member(name, "symlink", target=info.linkname)
    return Member(name, "file", bool(info.mode & 0o111), open=partial(extracted, tar, info))


def extracted(tar: tarfile.TarFile, info: tarfile.TarInfo) -> IO[bytes]:
    stream = tar.extractfile(info)
    assert stream is not None  # a regular file's
    return stream


@contextmanager
def zip_members(archive: Path, top: Path, source: str) -> Iterator[Iterator[Member]]:
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise SkillSourceError(
                f"{source} holds {len(infos)} members, more than {MAX_MEMBERS} (the limit)"
            )
        yield (zip_member(zf, info, source) for info in infos)


def zip_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, source: str) -> Member:
    name = info.filename
    mode = info.external_attr >> 16 if info.create_system == 3 else 0  # 3: made on unix
    kind = stat.S_IFMT(mode)
    member_parts(name, source)
    if info.is_dir() or kind == stat.S_IFDIR:
        return Member(name, "dir")
    if kind == stat.S_IFLNK:
        if info.file_size > MAX_LINK_BYTES:
            raise refuse(source, name, "a symlink with an overlong target")
        with zf.open(info) as stream:
            target = stream.read(MAX_LINK_BYTES + 1).decode("utf-8", "surrogateescape")
        check_link(name, target, source)
        return Member(name, "symlink", target=target)
    if kind not in (0, stat.S_IFREG):
        raise refuse(source, name, "a device, FIFO or socket")
    return Member(name, "file", bool(mode & 0o111), open=partial(zf.open, info))


def member_parts(name: str, source: str) -> tuple[str, ...]:
    """The member's path as parts, refused if absolute or holding a `..`."""
    if name.startswith("/"):
        raise refuse(source, name, "an absolute path")
    parts = PurePosixPath(name).parts
    if ".." in parts:
        raise refuse(source, name, "a path that climbs out with '..'")
    return parts


def check_link(name: str, target: str, source: str) -> None:
    """A symlink's target stays inside the archive's top, judged by its name (through
    other links it may still lead out: `check_tree` judges the finished tree)."""
    if not target or "\0" in target:
        raise refuse(source, name, "a symlink with no target")
    if target.startswith("/"):
        raise refuse(source, name, f"a symlink to the absolute path {target!r}")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
    if resolved == ".." or resolved.startswith("../"):
        raise refuse(source, name, f"a symlink to {target!r}, outside the archive")


def place(member: Member, top: Path, budget: Budget) -> None:
    """Write one member under `top`: never through a symlink, never over a directory."""
    budget.member(member.name)
    parts = member_parts(member.name, budget.source)
    if not parts:
        if member.kind == "dir":
            return  # the top itself ("./")
        raise refuse(budget.source, member.name, "an empty name")
    parent = top
    for part in parts[:-1]:
        parent = parent / part
        st = lstat(parent)
        if st is None:
            parent.mkdir(mode=0o755)
        elif stat.S_ISLNK(st.st_mode):
            raise refuse(budget.source, member.name, "a path through a symlink")
        elif not stat.S_ISDIR(st.st_mode):
            raise refuse(budget.source, member.name, "a path through a file")
    path = parent / parts[-1]
    st = lstat(path)
    if member.kind == "dir":
        if st is None:
            path.mkdir(mode=0o755)
        elif not stat.S_ISDIR(st.st_mode):
            raise refuse(budget.source, member.name, "a directory over a file or symlink")
        path.chmod(0o755)
        return
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise refuse(budget.source, member.name, "a file over a directory")
        path.unlink()  # a later member of the same name wins (tar's rule); a link is not followed
    if member.kind == "symlink":
        os.symlink(member.target, path)
        return
    assert member.open is not None
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as out, member.open() as stream:
        budget.copy(stream.read, out, member.name)
    path.chmod(file_mode(member.executable))


def lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except FileNotFoundError:
        return None
