"""The console browser tests' shared chromium (tests/support/browser.py): one per module, a
fresh context per page."""

from tests.support.browser import browser, shared_chromium

__all__ = ["browser", "shared_chromium"]
