"""``kubelab lab ui`` as a person uses it, for the tests that drive it: the command started in a
subprocess (its URL read from what it prints) and the page in a headless Chromium (Debian's
``chromium`` and ``chromium-driver``, through selenium), with screenshots kept for people to
look at.

Screenshots go to ``ui-screenshots/`` under pytest's base temporary directory (``pytest
--basetemp DIR`` puts them in ``DIR/ui-screenshots``); each test says where in its output.
The page's state is read through ``window.kubelabUi`` (its Cytoscape graph and the last
document) and its DOM, as a person would see it.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service as ChromeService

from tests.servers import REPO

START_TIMEOUT = 30.0
T = TypeVar("T")


@contextlib.contextmanager
def ui_command(*args: str) -> Iterator[str]:
    """``kubelab lab ui ARGS`` running; its URL (with the token).  Ended by its PID."""
    process = subprocess.Popen(
        [sys.executable, "-m", "kubelab", "lab", "ui", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
    )
    assert process.stdout is not None
    timer = threading.Timer(START_TIMEOUT, process.kill)
    timer.start()
    try:
        line = process.stdout.readline()
    finally:
        timer.cancel()
    match = re.search(r"serving lab \S+ on (http://\S+)", line)
    try:
        assert match, f"kubelab lab ui did not start: {line}{process.stdout.read()}"
        yield match.group(1)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()


def screenshots_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.getbasetemp() / "ui-screenshots"
    directory.mkdir(exist_ok=True)
    return directory


@dataclass
class Page:
    driver: webdriver.Chrome
    screenshots: Path

    def script(self, code: str, *args: Any) -> Any:
        return self.driver.execute_script(code, *args)

    def shot(self, name: str) -> Path:
        path = self.screenshots / f"{name}.png"
        self.driver.save_screenshot(str(path))
        print(f"screenshot: {path}")
        return path

    def graph_ids(self) -> set[str]:
        """The ids of every element drawn on the topology."""
        ids: list[str] = self.script("return window.kubelabUi.cy.elements().map(e => e.id())")
        return set(ids)

    def text(self, css: str) -> str:
        text: str = self.script(
            "const e = document.querySelector(arguments[0]); return e ? e.innerText : ''", css
        )
        return text

    def wait(self, what: str, check: Callable[[], T | None], timeout: float = 15.0) -> T:
        """``check()``'s first truthy value, polled; on timeout a screenshot and a failure."""
        deadline = time.monotonic() + timeout
        while True:
            found = check()
            if found:
                return found
            if time.monotonic() > deadline:
                shot = self.shot(f"timeout-{re.sub(r'[^a-z0-9]+', '-', what.lower())}")
                pytest.fail(f"page: {what} not within {timeout}s (see {shot})")
            time.sleep(0.2)


@contextlib.contextmanager
def browser(url: str, screenshots: Path, size: Sequence[int] = (1600, 1000)) -> Iterator[Page]:
    """The page at ``url`` in a headless Chromium, quit afterwards."""
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in (
        "--headless=new",
        "--no-sandbox",  # as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={size[0]},{size[1]}",
    ):
        options.add_argument(flag)
    service = ChromeService(shutil.which("chromedriver") or "chromedriver")
    driver = webdriver.Chrome(options=options, service=service)
    try:
        driver.get(url)
        yield Page(driver, screenshots)
    finally:
        driver.quit()
