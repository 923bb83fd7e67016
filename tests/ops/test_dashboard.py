"""The dashboard in a real headless Chromium (Debian's chromium and chromium-driver, driven
by Selenium) against `hermes serve` as a process: log in with the token, see the actor
tree, search a session and open its transcript, approve a pending pairing request by its
code, deny a command that waits for approval, run a cron job and see its run. A
screenshot of each step lands in the test's tmp dir."""

from __future__ import annotations

import base64
import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from hermes.agent.offline import tool_line
from hermes.state.maintenance import open_plain
from hermes.state.pairing import request_code
from tests.ops.surfaces import ops_url
from tests.processes import HERMES, hermes, wait_ready
from tests.seed import writing

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
BROWSER_PACKAGES = ("chromium", "chromium-driver")
WAIT = 30.0  # seconds for any one thing to show; the page polls every 2 or 5 s


@pytest.fixture
def browser(tmp_path: Path, require_system) -> Iterator[WebDriver]:
    """Headless Chromium through Debian's chromedriver (named, so Selenium Manager never
    runs); without them the test is skipped with the install command (failed in CI, which
    installs them: .ci/run)."""
    require_system(CHROMIUM, CHROMEDRIVER, packages=BROWSER_PACKAGES)
    options = Options()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    xdg = {name: str(tmp_path / "chromium-xdg") for name in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME")}
    service = Service(
        str(CHROMEDRIVER), log_output=str(tmp_path / "chromedriver.log"), env=os.environ | xdg
    )
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()
        _end_leftovers()


def test_without_the_browser_it_is_skipped_with_the_install_command_unless_required(
    require_system, monkeypatch, tmp_path
):
    nowhere = tmp_path / "chromium"  # as on a machine without the package
    monkeypatch.delenv("HERMES_TEST_REQUIRE_SYSTEM", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_system(nowhere, Path(sys.executable), packages=BROWSER_PACKAGES)
    assert str(skipped.value) == (
        "needs Debian's chromium and chromium-driver: apt-get install chromium chromium-driver"
        f" ({nowhere} missing)"
    )
    monkeypatch.setenv("HERMES_TEST_REQUIRE_SYSTEM", "1")  # CI: it must run
    with pytest.raises(pytest.fail.Exception) as failed:
        require_system(nowhere, packages=BROWSER_PACKAGES)
    assert str(failed.value).startswith(str(skipped.value))
    require_system(Path(sys.executable), packages=("python3",))  # there: the test goes on


def test_a_skip_inside_a_trio_test_keeps_its_install_line(tmp_path):
    """pytest-trio would report it as a bare "Skipped" (tests/conftest.py keeps it)."""
    test = tmp_path / "test_needs.py"
    test.write_text(
        "from pathlib import Path\n\n\nasync def test_needs(nursery, require_system):\n"
        "    require_system(Path('/nonexistent/prog'), packages=('prog',))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "HERMES_TEST_REQUIRE_SYSTEM"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p",
         "tests.conftest", "-n", "0", "-o", "trio_mode=true", "--rootdir", str(tmp_path),
         str(test)],
        capture_output=True, text=True, env=env, cwd=Path(__file__).parents[2], timeout=60,
    )  # fmt: skip
    assert "1 skipped" in done.stdout, done.stdout + done.stderr
    assert "needs Debian's prog: apt-get install prog (/nonexistent/prog missing)" in done.stdout


def _end_leftovers() -> None:
    """Chromium's crash handlers are daemons, so this process (a subreaper) adopts them,
    and they exit a moment after the browser: wait for that, then make sure."""
    ours = [p for p in psutil.Process().children(recursive=True) if _chromium(p)]
    _, alive = psutil.wait_procs(ours, timeout=10)
    for proc in alive:
        proc.kill()
    psutil.wait_procs(alive, timeout=5)


def _chromium(proc: psutil.Process) -> bool:
    try:
        return proc.name().startswith("chrom")  # chromium, chromedriver, chrome_crashpad
    except psutil.NoSuchProcess:
        return False


class Steps:
    """The browser's waits, clicks and screenshots, numbered in the order taken."""

    def __init__(self, driver: WebDriver, shots: Path) -> None:
        self.driver = driver
        self.shots = shots
        self.taken = 0

    def until(self, what: str, check: Callable[[WebDriver], Any]) -> Any:
        wait = WebDriverWait(self.driver, WAIT, ignored_exceptions=[StaleElementReferenceException])
        try:
            return wait.until(check, f"waited {WAIT} s for {what}")
        finally:
            with contextlib.suppress(WebDriverException):  # not in place of the real error
                self.shot(re.sub(r"\W+", "-", what).strip("-"))

    def shot(self, name: str) -> None:
        self.taken += 1
        self.driver.save_screenshot(str(self.shots / f"{self.taken:02d}-{name}.png"))

    def whole_page(self, name: str) -> None:
        """The page from top to bottom, beyond the window (DevTools' full-size capture)."""
        self.taken += 1
        width, height = self.driver.execute_script(
            "return [window.innerWidth, document.documentElement.scrollHeight];"
        )
        clip = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        png = self.driver.execute_cdp_cmd(
            "Page.captureScreenshot", {"captureBeyondViewport": True, "clip": clip}
        )
        (self.shots / f"{self.taken:02d}-{name}.png").write_bytes(base64.b64decode(png["data"]))

    def text(self, css: str) -> str:
        return " ".join(e.text for e in self.driver.find_elements(By.CSS_SELECTOR, css))

    def click(self, what: str, css: str) -> None:
        """Click the element once it is there; the page redraws its tables as it polls,
        so a row found just before a redraw is looked up again."""

        def clicked(driver: WebDriver) -> bool:
            found = driver.find_elements(By.CSS_SELECTOR, css)
            if not found:
                return False
            found[0].click()
            return True

        self.until(what, clicked)

    def errors(self, base: str) -> list[dict]:
        """The console's errors, but for the login page's own 401s: the page and its icon."""

        def login_page(message: str) -> bool:
            url = message.split(" ", 1)[0]
            return url in (f"{base}/", f"{base}/favicon.ico") and "status of 401" in message

        return [
            e
            for e in self.driver.get_log("browser")
            if e["level"] == "SEVERE" and not login_page(e["message"])
        ]


def _row(conn: Any, sql: str, *args: Any) -> tuple | None:
    return conn.execute(sql, args).fetchone()


@pytest.mark.timeout(120)
def test_the_dashboard_in_a_browser(home, spawn, browser, tmp_path):
    wait_ready(spawn())
    chat = hermes("chat", "-m", "the quick zebra")
    assert chat.returncode == 0 and "You said: the quick zebra" in chat.stdout, chat
    added = hermes("cron", "add", "every 2h", "--name", "weather", "--prompt", "the weather")
    assert added.returncode == 0, added
    job = added.stdout.split()[1]
    with writing(home.state_db) as conn:
        code = request_code(conn, "telegram", "4242", "Zed", time.time(), chat_id="4242").code
    # The offline model runs a guarded command: the turn waits for the operator's word.
    ran = tmp_path / "ran"
    asking = subprocess.Popen(
        [*HERMES, "chat", "-m", tool_line("terminal", command=f"echo DROP TABLE t; touch {ran}")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

    steps = Steps(browser, tmp_path)
    url = ops_url(home)
    browser.get(url + "/")
    steps.until("the login form", lambda d: d.find_elements(By.ID, "token"))
    browser.find_element(By.ID, "token").send_keys(home.serve_token.read_text().strip())
    browser.find_element(By.ID, "login-button").click()

    steps.until(
        "the actor tree",
        lambda d: (
            {"scheduler", "ops"}
            <= {r.get_attribute("data-actor") for r in d.find_elements(By.CSS_SELECTOR, "#tree tr")}
        ),
    )
    assert "running" in steps.text('#tree tr[data-actor="scheduler"]')

    steps.until("the session list", lambda d: d.find_elements(By.CSS_SELECTOR, "#sessions a"))
    browser.find_element(By.ID, "session-search").send_keys("zebra")
    browser.find_element(By.ID, "session-search-button").click()
    steps.until(
        "the search hits",
        lambda d: (
            "[zebra]" in steps.text("#sessions tbody")
            and d.find_elements(By.CSS_SELECTOR, "#sessions a[data-session]")
        ),
    )
    steps.click("a hit", "#sessions a[data-session]")
    steps.until(
        "the transcript",
        lambda d: "You said: the quick zebra" in steps.text("#transcript-messages li"),
    )
    assert "the quick zebra" in steps.text("#transcript-messages li")

    # The list shows the code's hint, and approving takes the code: never a click on a name.
    request = '#pairing tr[data-platform="telegram"][data-user="4242"]'
    steps.until("the pending request", lambda d: f"{code[:2]}******" in steps.text(request))
    assert code not in steps.text("#pairing") and "Zed" in steps.text(request)
    assert not browser.find_elements(By.CSS_SELECTOR, '#pairing [data-action="approve"]')
    steps.until(
        "the platform to approve on",
        lambda d: d.find_elements(By.CSS_SELECTOR, '#pairing-platform option[value="telegram"]'),
    )
    browser.find_element(By.ID, "pairing-code").send_keys(code.lower())  # typed as it comes
    steps.click("approve", "#pairing-approve-button")
    steps.until(
        "the approved user",
        lambda d: d.find_elements(By.CSS_SELECTOR, '#approved tr[data-approved="telegram:4242"]'),
    )
    assert "Zed" in steps.text('#approved tr[data-approved="telegram:4242"]')
    steps.until("the request gone", lambda d: not d.find_elements(By.CSS_SELECTOR, request))
    assert browser.find_element(By.ID, "pairing-code").get_attribute("value") == ""

    # The command waiting for approval, denied here as a chat's button would deny it.
    waiting = "#approvals tr[data-approval]"
    steps.until("the waiting command", lambda d: f"touch {ran}" in steps.text(waiting))
    assert "(local " in steps.text(waiting)  # who asked: the local endpoint's client
    approval = browser.find_element(By.CSS_SELECTOR, waiting).get_attribute("data-approval")
    steps.click("deny", f'{waiting} button[data-action="deny"]')
    steps.until("the request gone", lambda d: not d.find_elements(By.CSS_SELECTOR, waiting))
    out, err = asking.communicate(timeout=WAIT)
    assert asking.returncode == 0 and "denied" in out, (out, err)  # the turn went on
    assert not ran.exists()

    steps.click("run the job", f'#cron button[data-action="run"][data-job="{job}"]')
    steps.until(
        "a finished run", lambda d: d.find_elements(By.CSS_SELECTOR, "#cron-runs .state-ok")
    )
    assert "Runs of weather" in steps.text("#cron-history-title")
    last = f'#cron tr[data-job="{job}"] td:nth-child(6)'  # the job's last status
    steps.until("the job's last status", lambda d: steps.text(last) == "ok")

    steps.whole_page("the-whole-dashboard")
    assert not browser.find_element(By.ID, "error").is_displayed(), steps.text("#error")
    assert steps.errors(url) == []

    conn = open_plain(home.state_db)
    try:
        assert _row(
            conn,
            "SELECT user_name, approved_by FROM pairing_approved"
            " WHERE platform = 'telegram' AND user_id = '4242'",
        ) == ("Zed", "dashboard")
        assert _row(conn, "SELECT count(*) FROM pairing_requests WHERE user_id = '4242'") == (0,)
        assert _row(conn, "SELECT status FROM cron_runs WHERE job_id = ?", job) == ("ok",)
        decided = "SELECT state, decided_by FROM approvals WHERE id = ?"
        assert _row(conn, decided, approval) == ("denied", "dashboard")
    finally:
        conn.close()
