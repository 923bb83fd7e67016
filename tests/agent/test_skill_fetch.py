"""fetch_skill against real sources: a local directory, .tar.gz/.tar/.zip files, local git
repositories (cloned by file:// URL or copied by path), a repository served over git's
smart http and an archive over HTTP, both on 127.0.0.1 (reached only through an allow
list); and the refusals: members that would land outside, links out of the skill from
any source, hard links and devices, a git remote at a private address (before any
request) or redirecting, the member and size caps (counted as the bytes are written), no
SKILL.md. After every refusal nothing is left under `into`."""

from __future__ import annotations

import io
import os
import stat
import struct
import subprocess
import tarfile
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from hermes.agent.skills.fetch import (
    FETCHED,
    MAX_DOWNLOAD_BYTES,
    MAX_FILE_BYTES,
    MAX_MEMBERS,
    MAX_TOTAL_BYTES,
    SkillSourceError,
    fetch_skill,
)
from hermes.terminal.addresses import AllowList
from tests.fakes.local_http import LocalServer, Reply, TrackedHandler
from tests.fakes.pages import FakePages

SKILL = "---\nname: demo\ndescription: A demo skill for the tests.\n---\n\n# Demo\n\nRun it.\n"
SCRIPT = "#!/bin/sh\necho demo\n"
LOCAL = AllowList.parse(["127.0.0.1"])
MB = 2**20


@pytest.fixture
def into(tmp_path: Path) -> Path:
    path = tmp_path / "into"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
def pages():
    with FakePages() as fake:
        yield fake
    assert fake.internal_errors == []


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def left(into: Path) -> list[str]:
    return sorted(p.name for p in into.iterdir())


# -- building archives ------------------------------------------------------------------


def tar_file(
    name: str, data: bytes | str = b"", mode: int = 0o644
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    body = data.encode() if isinstance(data, str) else data
    info.size, info.mode = len(body), mode
    return info, body


def tar_entry(name: str, kind: bytes, target: str = "") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, target, 0o755 if kind == tarfile.DIRTYPE else 0o777
    return info, b""


def make_tar(path: Path, entries: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    compression = "w:gz" if path.name.endswith((".tar.gz", ".tgz")) else "w"
    options = {"compresslevel": 1} if compression == "w:gz" else {}
    with tarfile.open(path, compression, format=tarfile.PAX_FORMAT, **options) as tar:
        for info, body in entries:
            tar.addfile(info, io.BytesIO(body) if info.isreg() else None)
    return path


def make_zip(path: Path, entries: list[tuple[str, bytes | str, int]]) -> Path:
    """`entries`: (name, content, unix st_mode); a symlink's content is its target."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data, st_mode in entries:
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = st_mode << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return path


def skill_tar(path: Path, *extra: tuple[tarfile.TarInfo, bytes]) -> Path:
    return make_tar(path, [tar_file("demo/SKILL.md", SKILL), *extra])


def skill_zip(path: Path, *extra: tuple[str, bytes | str, int]) -> Path:
    return make_zip(path, [("demo/SKILL.md", SKILL, stat.S_IFREG | 0o644), *extra])


# -- what is fetched --------------------------------------------------------------------


def test_a_local_directory_is_copied_links_kept_as_links_without_git(tmp_path, into):
    src = tmp_path / "demo"
    (src / "scripts").mkdir(parents=True)
    (src / "references").mkdir()
    (src / ".git").mkdir()
    (src / ".git" / "config").write_text("[core]\n")
    (src / "SKILL.md").write_text(SKILL)
    (src / "scripts" / "run.sh").write_text(SCRIPT)
    (src / "scripts" / "run.sh").chmod(0o4755)
    (src / "references" / "guide.md").write_text("the guide")
    (src / "references").chmod(0o700)
    (src / "guide").symlink_to("references/guide.md")
    (src / "scripts" / "up").symlink_to("..")  # inside: the skill itself

    skill = fetch_skill(str(src), into)

    assert skill == into / FETCHED
    assert (skill / "SKILL.md").read_text() == SKILL
    assert (skill / "scripts" / "run.sh").read_text() == SCRIPT
    assert mode(skill / "scripts" / "run.sh") == 0o755  # executable, no longer setuid
    assert mode(skill / "SKILL.md") == 0o644
    assert mode(skill / "references") == 0o755
    assert (skill / "references" / "guide.md").read_text() == "the guide"
    assert os.readlink(skill / "guide") == "references/guide.md"
    assert os.readlink(skill / "scripts" / "up") == ".."
    assert not (skill / ".git").exists()
    assert left(into) == [FETCHED]


def test_a_local_directory_whose_only_directory_holds_the_skill(tmp_path, into):
    (tmp_path / "wrapper" / "demo").mkdir(parents=True)
    (tmp_path / "wrapper" / "demo" / "SKILL.md").write_text(SKILL)

    skill = fetch_skill(str(tmp_path / "wrapper"), into)

    assert skill == into / FETCHED / "demo"
    assert (skill / "SKILL.md").read_text() == SKILL


def test_a_local_directory_holding_a_fifo_is_refused_without_reading_it(tmp_path, into):
    src = tmp_path / "demo"
    src.mkdir()
    (src / "SKILL.md").write_text(SKILL)
    os.mkfifo(src / "pipe")

    with pytest.raises(SkillSourceError, match="pipe"):
        fetch_skill(str(src), into)
    assert left(into) == []


@pytest.mark.parametrize(
    ("name", "target", "why"),
    [
        ("pw", "/etc/passwd", "names the absolute path '/etc/passwd'"),
        ("up", "../../../../..", "leads to '../../../../..', outside the skill"),
        ("references/out", "../..", "leads to '../..', outside the skill"),
    ],
)
def test_a_local_directory_with_a_link_out_is_refused(tmp_path, into, name, target, why):
    src = tmp_path / "demo"
    (src / "references").mkdir(parents=True)
    (src / "SKILL.md").write_text(SKILL)
    (src / name).symlink_to(target)

    with pytest.raises(SkillSourceError, match=f"refused the symlink '{name}': it {why}"):
        fetch_skill(str(src), into)
    assert left(into) == []


def test_a_local_directory_with_a_link_out_through_another_link_is_refused(tmp_path, into):
    src = tmp_path / "demo"
    (src / "sub").mkdir(parents=True)
    (src / "SKILL.md").write_text(SKILL)
    (src / "sub" / "up").symlink_to("..")  # the skill: inside
    (src / "sub" / "out").symlink_to("up/../..")  # by its name demo; through `up`, its parent

    with pytest.raises(SkillSourceError, match="'sub/out': it leads to 'up/../..', outside"):
        fetch_skill(str(src), into)
    assert left(into) == []


def test_a_tar_gz_with_one_top_level_directory(tmp_path, into):
    archive = skill_tar(
        tmp_path / "demo.tar.gz",
        tar_entry("demo/scripts", tarfile.DIRTYPE),
        tar_file("demo/scripts/run.sh", SCRIPT, 0o4755),
        tar_file("demo/references/guide.md", "the guide", 0o600),
        tar_entry("demo/assets/guide", tarfile.SYMTYPE, "../references/guide.md"),
    )

    skill = fetch_skill(str(archive), into)

    assert skill == into / FETCHED / "demo"
    assert (skill / "SKILL.md").read_text() == SKILL
    assert (skill / "scripts" / "run.sh").read_text() == SCRIPT
    assert mode(skill / "scripts" / "run.sh") == 0o755
    assert mode(skill / "references" / "guide.md") == 0o644
    assert os.readlink(skill / "assets" / "guide") == "../references/guide.md"
    assert (skill / "assets" / "guide").read_text() == "the guide"
    assert left(into) == [FETCHED]


def test_a_plain_tar_with_the_skill_at_its_top(tmp_path, into):
    archive = make_tar(tmp_path / "demo.tar", [tar_file("./SKILL.md", SKILL)])

    skill = fetch_skill(str(archive), into)

    assert skill == into / FETCHED
    assert (skill / "SKILL.md").read_text() == SKILL


def test_a_zip_keeps_only_the_executable_bit_and_inside_links(tmp_path, into):
    archive = skill_zip(
        tmp_path / "demo.zip",
        ("demo/scripts/", b"", stat.S_IFDIR | 0o700),
        ("demo/scripts/run.sh", SCRIPT, stat.S_IFREG | 0o6775),
        ("demo/references/guide.md", "the guide", stat.S_IFREG | 0o666),
        ("demo/guide", "references/guide.md", stat.S_IFLNK | 0o777),
        ("demo/notes.txt", "made on Windows", 0),  # no unix mode at all
    )

    skill = fetch_skill(str(archive), into)

    assert skill == into / FETCHED / "demo"
    assert (skill / "SKILL.md").read_text() == SKILL
    assert mode(skill / "scripts") == 0o755
    assert mode(skill / "scripts" / "run.sh") == 0o755
    assert mode(skill / "references" / "guide.md") == 0o644
    assert mode(skill / "notes.txt") == 0o644
    assert os.readlink(skill / "guide") == "references/guide.md"
    assert (skill / "guide").read_text() == "the guide"


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.com",
            "-c",
            "init.defaultBranch=main",
            *args,
        ],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git work tree with one commit of a skill, and a file never committed."""
    path = tmp_path / "repo"
    (path / "scripts").mkdir(parents=True)
    (path / "SKILL.md").write_text(SKILL)
    (path / "scripts" / "run.sh").write_text(SCRIPT)
    (path / "scripts" / "run.sh").chmod(0o755)
    git("init", "-q", cwd=path)
    git("add", "SKILL.md", "scripts", cwd=path)
    git("commit", "-q", "-m", "a skill", cwd=path)
    (path / "draft.md").write_text("not committed")
    return path


def test_a_git_repository_by_file_url_is_cloned_without_its_git_directory(repo, into):
    skill = fetch_skill(repo.as_uri(), into)

    assert skill == into / FETCHED
    assert (skill / "SKILL.md").read_text() == SKILL
    assert (skill / "scripts" / "run.sh").read_text() == SCRIPT
    assert mode(skill / "scripts" / "run.sh") & 0o111
    assert not (skill / "draft.md").exists()  # what was committed, not the work tree
    assert not (skill / ".git").exists()
    assert left(into) == [FETCHED]


def test_a_git_work_tree_by_path_is_copied_without_its_git_directory(repo, into):
    skill = fetch_skill(str(repo), into)

    assert (skill / "SKILL.md").read_text() == SKILL
    assert (skill / "draft.md").read_text() == "not committed"
    assert not (skill / ".git").exists()


def test_a_bare_repository_by_path_is_cloned(repo, tmp_path, into):
    git("clone", "-q", "--bare", str(repo), str(tmp_path / "bare.git"), cwd=tmp_path)

    skill = fetch_skill(str(tmp_path / "bare.git"), into)

    assert (skill / "SKILL.md").read_text() == SKILL
    assert (skill / "scripts" / "run.sh").read_text() == SCRIPT
    assert not (skill / ".git").exists()


@pytest.mark.parametrize(
    ("name", "target"), [("pw", "/etc/passwd"), ("up", "../../../../.."), ("scripts/x", "../..")]
)
def test_a_clone_with_a_link_out_is_refused(repo, into, name, target):
    (repo / name).symlink_to(target)
    git("add", name, cwd=repo)
    git("commit", "-q", "-m", "a link out", cwd=repo)

    with pytest.raises(SkillSourceError, match=f"refused the symlink '{name}'"):
        fetch_skill(repo.as_uri(), into)
    assert left(into) == []


def test_a_failing_clone_says_what_git_said_and_leaves_nothing(tmp_path, into):
    with pytest.raises(SkillSourceError, match="cannot clone .*does not appear to be a git"):
        fetch_skill((tmp_path / "missing.git").as_uri(), into)
    assert left(into) == []


class GitServer(LocalServer):
    """git's smart http protocol on 127.0.0.1 (`git http-backend` for each request) for
    the repositories under `root`; /moved.git/... redirects to /demo.git/...; the path of
    every request, in order, in `requests`."""

    def __init__(self, root: Path) -> None:
        super().__init__(GitHandler)
        self.root = root
        self.requests: list[str] = []


class GitHandler(TrackedHandler):
    server: GitServer

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self._serve(b"")

    def _serve(self, raw: bytes) -> None:
        url = urlsplit(self.path)
        self.server.requests.append(url.path)
        if url.path.startswith("/moved.git/"):
            moved = "/demo.git/" + url.path.removeprefix("/moved.git/") + "?" + url.query
            self._answer(Reply(302, None, [("location", moved)]))
            return
        env = {
            "PATH": os.environ["PATH"],
            "GIT_PROJECT_ROOT": str(self.server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": url.path,
            "QUERY_STRING": url.query,
            "CONTENT_TYPE": self.headers.get("content-type", ""),
            "CONTENT_LENGTH": str(len(raw)),
            "HTTP_CONTENT_ENCODING": self.headers.get("content-encoding", ""),
            "REMOTE_ADDR": "127.0.0.1",
        }
        out = subprocess.run(["git", "http-backend"], input=raw, env=env, capture_output=True)
        head, _, body = out.stdout.partition(b"\r\n\r\n")
        status, content_type, headers = 200, "text/plain", []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name.lower() == "content-type":
                content_type = value.strip()
            elif name:
                headers.append((name, value.strip()))
        self._answer(Reply(status, body, headers, content_type))


@pytest.fixture
def git_server(repo: Path, tmp_path: Path):
    """`repo`, served as /demo.git."""
    served = tmp_path / "served"
    served.mkdir()
    git("clone", "-q", "--bare", str(repo), str(served / "demo.git"), cwd=tmp_path)
    server = GitServer(served)
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_git_repository_over_http_with_the_host_allowed(git_server, into, host):
    url = git_server.url.replace("127.0.0.1", host) + "/demo.git"

    skill = fetch_skill(url, into, allow_private=AllowList.parse([host]))

    assert (skill / "SKILL.md").read_text() == SKILL
    assert (skill / "scripts" / "run.sh").read_text() == SCRIPT
    assert not (skill / ".git").exists()
    assert "/demo.git/info/refs" in git_server.requests


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:1/x.git",
        "git+https://127.0.0.1:1/x",
        "git://127.0.0.1/x.git",
        "ssh://git@127.0.0.1/x.git",
        "git@127.0.0.1:x.git",
        "git@[::1]:x.git",
        "https://localhost/x.git",
    ],
)
def test_a_git_remote_at_a_private_address_is_refused_before_cloning(into, url):
    with pytest.raises(SkillSourceError, match="is loopback; .* under web.allow_private"):
        fetch_skill(url, into)
    assert left(into) == []


def test_a_git_remote_at_a_private_address_is_refused_before_any_request(git_server, into):
    with pytest.raises(SkillSourceError, match="127.0.0.1 is loopback"):
        fetch_skill(git_server.url + "/demo.git", into)
    assert left(into) == []
    assert git_server.requests == []


def test_a_git_remote_naming_no_host_is_refused(into):
    with pytest.raises(SkillSourceError, match="names no host"):
        fetch_skill("ssh:///x.git", into)
    assert left(into) == []


def test_a_git_clone_follows_no_redirect(git_server, into):
    with pytest.raises(SkillSourceError, match="cannot clone"):
        fetch_skill(git_server.url + "/moved.git", into, allow_private=LOCAL)
    assert left(into) == []
    assert git_server.requests == ["/moved.git/info/refs"]


def test_an_archive_over_http_with_the_host_allowed(tmp_path, pages, into):
    data = skill_tar(tmp_path / "demo.tar.gz").read_bytes()
    url = pages.page("/skills/demo.tar.gz", data, "application/octet-stream")

    skill = fetch_skill(url, into, allow_private=LOCAL)

    assert skill == into / FETCHED / "demo"
    assert (skill / "SKILL.md").read_text() == SKILL
    assert left(into) == [FETCHED]  # the downloaded archive is gone


def test_an_archive_over_http_by_its_content_type_after_a_redirect(tmp_path, pages, into):
    data = skill_zip(tmp_path / "demo.zip").read_bytes()
    pages.page("/download", data, "application/zip")
    url = pages.redirect("/latest", "/download")

    skill = fetch_skill(url, into, allow_private=LOCAL)

    assert (skill / "SKILL.md").read_text() == SKILL
    assert pages.requests == ["/latest", "/download"]


def test_loopback_is_refused_without_the_allow_list(tmp_path, pages, into):
    url = pages.page(
        "/demo.tar.gz", skill_tar(tmp_path / "demo.tar.gz").read_bytes(), "application/gzip"
    )

    with pytest.raises(SkillSourceError, match="127.0.0.1 is loopback"):
        fetch_skill(url, into)
    assert left(into) == []
    assert pages.requests == []  # nothing was asked of it


def test_a_web_page_is_not_an_archive(pages, into):
    url = pages.page("/skills/demo", "<html>a page</html>", "text/html")

    with pytest.raises(SkillSourceError, match="not an archive"):
        fetch_skill(url, into, allow_private=LOCAL)
    assert left(into) == []


def test_a_download_over_its_cap_is_refused(pages, into):
    url = pages.page("/big.zip", bytes(MAX_DOWNLOAD_BYTES + 1), "application/zip")

    with pytest.raises(SkillSourceError, match="larger than"):
        fetch_skill(url, into, allow_private=LOCAL)
    assert left(into) == []


def test_an_http_error_is_refused(pages, into):
    with pytest.raises(SkillSourceError, match="404"):
        fetch_skill(pages.url + "/gone.tar.gz", into, allow_private=LOCAL)
    assert left(into) == []


# -- refusals ---------------------------------------------------------------------------


def refused_tar(tmp_path: Path, name: str, *entries: tuple[tarfile.TarInfo, bytes]) -> str:
    return str(skill_tar(tmp_path / name, *entries))


def refused_zip(tmp_path: Path, name: str, *entries: tuple[str, bytes | str, int]) -> str:
    return str(skill_zip(tmp_path / name, *entries))


def file_entry(kind: str, name: str, data: str = "x"):
    return tar_file(name, data) if kind == "tar" else (name, data, stat.S_IFREG | 0o644)


def link_entry(kind: str, name: str, target: str):
    if kind == "tar":
        return tar_entry(name, tarfile.SYMTYPE, target)
    return (name, target, stat.S_IFLNK | 0o777)


def archive(tmp_path: Path, kind: str, *entries) -> str:
    if kind == "tar":
        return refused_tar(tmp_path, "bad.tar.gz", *entries)
    return refused_zip(tmp_path, "bad.zip", *entries)


@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_a_member_climbing_out_is_refused(tmp_path, into, kind):
    source = archive(tmp_path, kind, file_entry(kind, "demo/../../evil"))

    with pytest.raises(SkillSourceError, match=r"demo/\.\./\.\./evil.*climbs out"):
        fetch_skill(source, into)
    assert left(into) == []
    assert not (tmp_path / "evil").exists()


@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_an_absolute_member_is_refused(tmp_path, into, kind):
    target = tmp_path / "absolute"
    source = archive(tmp_path, kind, file_entry(kind, str(target)))

    with pytest.raises(SkillSourceError, match="an absolute path"):
        fetch_skill(source, into)
    assert left(into) == []
    assert not target.exists()


@pytest.mark.parametrize("kind", ["tar", "zip"])
@pytest.mark.parametrize("target", ["../../outside", "/etc/passwd", "../../"])
def test_a_symlink_out_is_refused(tmp_path, into, kind, target):
    source = archive(tmp_path, kind, link_entry(kind, "demo/out", target))

    with pytest.raises(SkillSourceError, match="'demo/out': a symlink to"):
        fetch_skill(source, into)
    assert left(into) == []


@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_a_symlink_out_through_another_link_is_refused(tmp_path, into, kind):
    # demo/sub/up -> .. is demo (inside); demo/sub/out -> up/../.. reads as demo by its
    # name, inside, but through `up` it resolves to demo/../.., the archive's parent.
    source = archive(
        tmp_path,
        kind,
        link_entry(kind, "demo/sub/up", ".."),
        link_entry(kind, "demo/sub/out", "up/../.."),
    )

    with pytest.raises(SkillSourceError, match="outside"):
        fetch_skill(source, into)
    assert left(into) == []


@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_a_symlink_out_of_the_skill_but_inside_the_archive_is_refused(tmp_path, into, kind):
    # demo/ is what is installed (moved elsewhere): ../elsewhere would then name whatever
    # lies beside it there, another skill perhaps.
    source = archive(tmp_path, kind, link_entry(kind, "demo/beside", "../elsewhere"))

    with pytest.raises(SkillSourceError, match="'demo/beside': it leads to '../elsewhere'"):
        fetch_skill(source, into)
    assert left(into) == []


@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_a_member_written_through_a_symlink_is_refused(tmp_path, into, kind):
    source = archive(
        tmp_path,
        kind,
        link_entry(kind, "demo/assets", "references"),
        file_entry(kind, "demo/references/guide.md"),
        file_entry(kind, "demo/assets/injected.md"),
    )

    with pytest.raises(SkillSourceError, match="through a symlink"):
        fetch_skill(source, into)
    assert left(into) == []


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        (tar_entry("demo/hard", tarfile.LNKTYPE, "demo/SKILL.md"), "a hard link"),
        (tar_entry("demo/tty", tarfile.CHRTYPE), "a device or FIFO"),
        (tar_entry("demo/disk", tarfile.BLKTYPE), "a device or FIFO"),
        (tar_entry("demo/pipe", tarfile.FIFOTYPE), "a device or FIFO"),
    ],
)
def test_tar_hard_links_devices_and_fifos_are_refused(tmp_path, into, entry, why):
    with pytest.raises(SkillSourceError, match=f"'{entry[0].name}': {why}"):
        fetch_skill(refused_tar(tmp_path, "bad.tar", entry), into)
    assert left(into) == []


def test_a_zip_fifo_is_refused(tmp_path, into):
    source = refused_zip(tmp_path, "bad.zip", ("demo/pipe", b"", stat.S_IFIFO | 0o644))

    with pytest.raises(SkillSourceError, match="'demo/pipe': a device, FIFO or socket"):
        fetch_skill(source, into)
    assert left(into) == []


@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_the_member_cap(tmp_path, into, kind):
    # SKILL.md and MAX_MEMBERS - 1 files: at the cap, installed; one more: refused.
    files = [file_entry(kind, f"demo/references/{n}.md", "") for n in range(MAX_MEMBERS - 1)]
    skill = fetch_skill(archive(tmp_path, kind, *files), into)
    assert len(list((skill / "references").iterdir())) == MAX_MEMBERS - 1

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    over = archive(tmp_path, kind, *files, file_entry(kind, "demo/one-more.md", ""))
    with pytest.raises(SkillSourceError, match=f"more than {MAX_MEMBERS}"):
        fetch_skill(over, fresh)
    assert left(fresh) == []


def test_the_file_cap(tmp_path, into):
    source = refused_tar(tmp_path, "big.tar.gz", tar_file("demo/zeros", bytes(MAX_FILE_BYTES + 1)))

    with pytest.raises(SkillSourceError, match="'demo/zeros' is larger than the 10 MB"):
        fetch_skill(source, into)
    assert left(into) == []


def test_the_total_cap_counts_what_is_written(tmp_path, into):
    # Five files at the file cap make MAX_TOTAL_BYTES; SKILL.md's bytes put it just over.
    assert 5 * MAX_FILE_BYTES == MAX_TOTAL_BYTES
    zeros = bytes(MAX_FILE_BYTES)
    source = refused_tar(
        tmp_path, "big.tar.gz", *(tar_file(f"demo/zeros{n}", zeros) for n in range(5))
    )
    assert os.path.getsize(source) < MB  # zeros: a small archive for a big tree

    with pytest.raises(SkillSourceError, match=r"more than 50 MB .*'demo/zeros4'"):
        fetch_skill(source, into)
    assert left(into) == []


def lie_about_size(path: Path, name: str, size: int) -> None:
    """Make the zip at `path` claim `name` is `size` bytes, in its local header and its
    central directory, leaving its data (and CRC) as they were."""
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        offset = zf.getinfo(name).header_offset
    struct.pack_into("<I", raw, offset + 22, size)  # the local header's uncompressed size
    central = raw.find(b"PK\x01\x02")
    while raw[central + 46 : central + 46 + len(name)] != name.encode():
        central = raw.find(b"PK\x01\x02", central + 4)
    struct.pack_into("<I", raw, central + 24, size)  # the central directory's
    path.write_bytes(bytes(raw))


def test_a_zip_member_lying_about_its_size_is_refused(tmp_path, into):
    path = skill_zip(
        tmp_path / "lying.zip", ("demo/zeros", bytes(MAX_FILE_BYTES + 1), stat.S_IFREG | 0o644)
    )
    lie_about_size(path, "demo/zeros", 1000)
    with zipfile.ZipFile(path) as zf:
        assert zf.getinfo("demo/zeros").file_size == 1000  # what a header check would see

    with pytest.raises(SkillSourceError, match="cannot unpack .*demo/zeros"):
        fetch_skill(str(path), into)
    assert left(into) == []


@pytest.mark.parametrize(
    "entries",
    [
        [tar_file("demo/README.md", "no skill here")],
        [tar_file("one/SKILL.md", SKILL), tar_file("two/SKILL.md", SKILL)],
        [tar_file("outer/inner/SKILL.md", SKILL)],
        [tar_file("demo/SKILL.md/x", SKILL)],
    ],
)
def test_no_skill_md_at_the_top_or_in_the_only_directory(tmp_path, into, entries):
    source = make_tar(tmp_path / "nothing.tar.gz", entries)

    with pytest.raises(SkillSourceError, match="no SKILL.md in"):
        fetch_skill(str(source), into)
    assert left(into) == []


def test_a_local_directory_without_skill_md_is_refused_before_copying(tmp_path, into):
    (tmp_path / "empty").mkdir()

    with pytest.raises(SkillSourceError, match="no SKILL.md in"):
        fetch_skill(str(tmp_path / "empty"), into)
    assert left(into) == []


def test_a_corrupt_archive_is_refused(tmp_path, into):
    (tmp_path / "broken.tar.gz").write_bytes(b"\x1f\x8b not really gzip")

    with pytest.raises(SkillSourceError, match="cannot unpack"):
        fetch_skill(str(tmp_path / "broken.tar.gz"), into)
    assert left(into) == []


@pytest.mark.parametrize(
    ("source", "match"),
    [
        ("ftp://example.com/demo.zip", "not a source hermes takes"),
        ("ext::sh -c touch% pwned", "no such file or directory"),
        ("no/such/dir", "no such file or directory"),
    ],
)
def test_what_is_not_a_source_says_what_is(into, source, match):
    with pytest.raises(SkillSourceError, match=f"{match}; accepted: a skill directory"):
        fetch_skill(source, into)
    assert left(into) == []


def test_a_file_that_is_not_an_archive_is_refused(tmp_path, into):
    (tmp_path / "notes.txt").write_text("hello")

    with pytest.raises(SkillSourceError, match="not an archive"):
        fetch_skill(str(tmp_path / "notes.txt"), into)
    assert left(into) == []
