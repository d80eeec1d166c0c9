"""The service's page in a real headless Chromium: type a sentence and a phrase it must contain,
find the phrase in the translation (the library's constrained translation, exactly).

Browser set-up (and when the test skips): tests/browser_setup.py. Select with `-m browser`.
"""

from __future__ import annotations

import pytest

from aiayn.inference import load
from browser_setup import headless_chromium

from .conftest import SOURCES

pytest.importorskip("fastapi", reason="the 'serve' extra is not installed (pip install -e '.[serve]')")
from .helpers import ThreadedServer

pytestmark = pytest.mark.browser


def test_type_a_constraint_and_find_it_in_the_translation(translation_dir):
    phrase = "dog"
    expected = load(translation_dir, "cpu").translate([SOURCES[0]], beam=4, include=[[phrase]])[0]
    assert phrase in expected
    with headless_chromium() as browser, ThreadedServer(translation_dir) as server:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(server.url)
        page.wait_for_selector("body[data-ready='1']")
        assert page.is_visible("#include") and page.is_visible("#exclude")
        page.fill("#include", phrase)
        page.fill("#input", SOURCES[0])
        page.press("#input", "Enter")
        page.wait_for_selector("#output-card:not([hidden])")
        page.wait_for_function("!document.body.dataset.busy")
        assert page.inner_text("#output") == expected
        assert phrase in page.inner_text("#output")
        assert page.is_hidden("#view")  # the attention view shows unconstrained search: not this output
        # cleared, the page goes back to the unconstrained translation and its attention
        page.fill("#include", "")
        page.press("#input", "Enter")
        page.wait_for_selector("#heatmap[data-sentence='1']")
        assert page.is_visible("#view") and phrase not in page.inner_text("#output")
        assert errors == []
