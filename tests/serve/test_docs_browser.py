"""The service's /docs page (Swagger UI) in a real headless Chromium with every other host
unreachable: it renders from this server's own assets and lists the API's operations; the page
(/) starts with an example input filled in.

Browser set-up (and when the test skips): tests/browser_setup.py. Select with `-m browser`.
"""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from browser_setup import headless_chromium

pytest.importorskip("fastapi", reason="the 'serve' extra is not installed (pip install -e '.[serve]')")
from aiayn.serve.served_model import EXAMPLE_INPUTS

from .helpers import ThreadedServer

pytestmark = pytest.mark.browser


def offline_page(browser, server):
    """A page whose requests to any host but the server's are aborted (and recorded)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    own = urlparse(server.url).netloc
    elsewhere, errors = [], []

    def route(request_route):
        if urlparse(request_route.request.url).netloc == own:
            request_route.continue_()
        else:
            elsewhere.append(request_route.request.url)
            request_route.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return page, elsewhere, errors


def test_docs_lists_the_operations_offline_and_the_page_has_an_example(translation_dir):
    with headless_chromium() as browser, ThreadedServer(translation_dir) as server:
        page, elsewhere, errors = offline_page(browser, server)
        page.goto(server.url.rstrip("/") + "/docs")
        page.wait_for_selector(".opblock-summary-path", timeout=30_000)
        paths = page.eval_on_selector_all(".opblock-summary-path", "ps => ps.map(p => p.dataset.path)")
        assert {"/v1/translate", "/v1/attention", "/v1/model", "/health"} <= set(paths)
        assert page.inner_text(".info .title").startswith("aiayn serve")
        assert elsewhere == [] and errors == []

        page.goto(server.url)
        page.wait_for_selector("body[data-ready='1']")
        assert page.input_value("#input") == EXAMPLE_INPUTS["translation"]
        assert elsewhere == [] and errors == []
