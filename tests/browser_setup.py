"""Headless Chromium for the page tests (the explorer's and the service's).

Needs the Debian `chromium` package and Playwright's Python package (the `browser` extra);
a test is skipped when either is missing (failed instead when AIAYN_REQUIRE_BROWSER=1, as in
CI). The path of Chromium can be changed with AIAYN_CHROMIUM. (Never `playwright install`:
it downloads a browser build.)
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator

import pytest

CHROMIUM = os.environ.get("AIAYN_CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def missing(reason: str) -> None:
    """Skip, or fail where the browser is required (CI sets AIAYN_REQUIRE_BROWSER=1)."""
    if os.environ.get("AIAYN_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason}, but AIAYN_REQUIRE_BROWSER=1", pytrace=False)
    pytest.skip(reason)


@contextlib.contextmanager
def headless_chromium() -> Iterator:
    """A Playwright `Browser` on Debian's Chromium (skips when it cannot be had)."""
    try:
        from playwright import sync_api
    except ImportError:
        missing("playwright is not installed (pip install -e '.[browser]')")
    if not (os.path.isfile(CHROMIUM) or shutil.which(CHROMIUM)):
        missing(f"no Chromium at {CHROMIUM} (apt-get install chromium chromium-driver)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            yield browser
        finally:
            browser.close()
