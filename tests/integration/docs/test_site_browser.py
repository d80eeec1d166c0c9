"""The built site in a real headless Chromium at 1280 px: the home page, a reference page, the
install page, the paper page, the tutorial and two results pages show every section of the
navigation, none scrolls sideways, nothing is fetched from another host, the paper's equations
are typeset by the site's own KaTeX, and the search finds a page.

The browser set-up (and when the test skips) is tests/browser_setup.py. The screenshots under docs/
(`site_home.png`, `site_settings.png`, `site_tutorial.png`, `site_results_decoding.png`) come from
this test: run it with AIAYN_DOCS_SCREENSHOTS=docs.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from browser_setup import headless_chromium

pytestmark = pytest.mark.browser

SECTIONS = ["Learn", "Use", "Reference", "Results", "Project"]
PAGES = {"": "site_home.png", "reference/settings/": "site_settings.png", "install/": None, "paper/": None,
         "tutorial/": "site_tutorial.png", "results/decoding-speed/": "site_results_decoding.png",
         "results/quality/": None}


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def site_url(built_site: Path) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(built_site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        thread.join()


VISIBLE_NAV = """() => [...document.querySelectorAll('.md-sidebar--primary .md-nav__link')]
    .filter(e => e.offsetParent !== null && e.getBoundingClientRect().width > 0)
    .map(e => e.textContent.trim())"""


def test_the_pages_at_1280px(site_url: str) -> None:
    shots = os.environ.get("AIAYN_DOCS_SCREENSHOTS")
    with headless_chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        requests, errors = [], []
        page.on("request", lambda request: requests.append(request.url))
        page.on("pageerror", lambda error: errors.append(str(error)))
        for path, shot in PAGES.items():
            page.goto(site_url + path, wait_until="networkidle")
            nav = page.evaluate(VISIBLE_NAV)
            assert [name for name in SECTIONS if name not in nav] == [], f"/{path}: nav shows {nav}"
            width = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
            assert width[0] <= width[1], f"/{path} scrolls sideways: {width[0]} px wide in {width[1]}"
            if path == "paper/":
                assert page.locator(".arithmatex .katex").count() >= 10, "the equations are not typeset"
            if shots and shot:
                page.screenshot(path=str(Path(shots) / shot))
        # the measure sees a page that does scroll sideways (a planted 2000 px wide block)
        page.evaluate("document.querySelector('.md-content').append(Object.assign("
                      "document.createElement('div'), {style: 'width: 2000px; height: 1px'}))")
        assert page.evaluate("document.documentElement.scrollWidth") > page.evaluate("innerWidth")
        page.click("input.md-search__input")  # typed once the search index is loaded ("Type to start...")
        page.wait_for_function("document.querySelector('.md-search-result__meta').textContent.includes('Type')")
        page.keyboard.type("label smoothing")
        page.wait_for_selector(".md-search-result__item", timeout=15_000)
        assert page.locator(".md-search-result__item").count() > 0
        page.close()
    assert errors == []
    remote = [url for url in requests if not url.startswith(site_url)]
    assert remote == [], f"the site fetched from another host: {remote}"
