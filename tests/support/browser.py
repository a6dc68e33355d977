"""Headless Debian `chromium` driven by Playwright for Python (the system browser through
`executable_path`; a browser is never downloaded)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def require_chromium() -> None:
    """Skip where Debian's chromium is absent, except in CI (`.ci/run` installs it)."""
    if CHROMIUM.exists():
        return
    message = f"{CHROMIUM} is missing (apt-get install -y chromium)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless chromium, closed after use."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


class Pages:
    """One test's pages on a shared chromium: each page has a fresh context of its own (no
    cookies, storage or routes from another test), and all are closed when the test ends."""

    def __init__(self, browser: Browser) -> None:
        self._browser = browser
        self._pages: list[Page] = []

    def new_page(self, **options: Any) -> Page:
        """A page in a new browser context (`Browser.new_page`: the context closes with it)."""
        page = self._browser.new_page(**options)
        self._pages.append(page)
        return page

    def close(self) -> None:
        for page in self._pages:
            page.close()
        self._pages.clear()


@pytest.fixture(scope="module")
def shared_chromium() -> Iterator[Browser]:
    """One chromium per test module (launching one costs seconds on a busy machine). Not per
    session: Playwright's sync API keeps an event loop in this thread while it runs, which a
    later asyncio test in the same worker would trip over."""
    with chromium() as browser:
        yield browser


@pytest.fixture
def browser(shared_chromium: Browser) -> Iterator[Pages]:
    """This test's pages on the module's chromium (`Pages`), closed after the test."""
    pages = Pages(shared_chromium)
    try:
        yield pages
    finally:
        pages.close()


def screenshot_dir(default: Path) -> Path:
    """Where the tests write screenshots: `TURNKEEP_CONSOLE_SCREENSHOTS` (e.g. `docs/console`
    to refresh the committed ones), else `default` (a test's tmp dir)."""
    chosen = os.environ.get("TURNKEEP_CONSOLE_SCREENSHOTS")
    target = Path(chosen) if chosen else default
    target.mkdir(parents=True, exist_ok=True)
    return target


def clear(target: Path) -> None:
    """Remove earlier screenshots from `target`."""
    for old in target.glob("*.png"):
        old.unlink()
    shutil.rmtree(target / "tmp", ignore_errors=True)
