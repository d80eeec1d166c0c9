"""The explorer page in a real headless Chromium: switching layer and head shows the model's
weights (to 1e-3), hovering highlights, and nothing is fetched from the network.

The browser set-up (and when the test skips) is tests/browser_setup.py. Select it alone with
`pytest -m browser`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from aiayn.cli.main import main
from aiayn.inference import load
from browser_setup import headless_chromium
from plots.conftest import SOURCES, TARGETS, reference_maps

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser():
    with headless_chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def page_file(model_dir, tmp_path_factory):
    directory = tmp_path_factory.mktemp("explorer")
    src, ref = directory / "src.txt", directory / "ref.txt"
    src.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    ref.write_text("\n".join(TARGETS) + "\n", encoding="utf-8")
    out = directory / "page.html"
    argv = ["explore", "--model", str(model_dir), "--input", str(src), "--ref", str(ref), "--out", str(out)]
    assert main(argv) == 0
    return out


def shown(page) -> tuple[dict, np.ndarray]:
    """The heatmap's state (kind, layer, head) and its weights as a (queries, keys) array."""
    state = page.eval_on_selector("#heatmap", "t => ({...t.dataset})")
    cells = page.eval_on_selector_all(
        "#heatmap td[data-weight]", "cs => cs.map(c => [+c.dataset.q, +c.dataset.k, +c.dataset.weight])"
    )
    rows, cols = max(c[0] for c in cells) + 1, max(c[1] for c in cells) + 1
    weights = np.full((rows, cols), np.nan)
    for q, k, w in cells:
        weights[q, k] = w
    assert not np.isnan(weights).any()
    return state, weights


def test_switching_layer_and_head_shows_the_models_weights(browser, page_file, model_dir, tmp_path):
    tokenizer = load(model_dir, "cpu").tokenizers.target
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requests, errors = [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(page_file.as_uri())
    page.wait_for_selector("body[data-ready='1']")

    # the default view: encoder-decoder attention, last layer, average over heads
    expected = reference_maps(model_dir, SOURCES[0], tokenizer.encode(TARGETS[0]))
    state, weights = shown(page)
    assert state == {"sentence": "0", "kind": "cross", "layer": "2", "head": "mean"}
    np.testing.assert_allclose(weights, expected.cross[2][0].mean(dim=0).numpy(), atol=1e-3)

    # choose sentence 3, encoder self-attention, then walk through layers and heads
    page.select_option("#sentence", "2")
    expected = reference_maps(model_dir, SOURCES[2], tokenizer.encode(TARGETS[2]))
    page.select_option("#kind", "encoder")
    seen = []
    for layer, head in [(0, 0), (0, 1), (1, 1)]:
        page.select_option("#layer", str(layer))
        page.select_option("#head", str(head))
        state, weights = shown(page)
        assert state == {"sentence": "2", "kind": "encoder", "layer": str(layer), "head": str(head)}
        np.testing.assert_allclose(weights, expected.encoder[layer][0, head].numpy(), atol=1e-3)
        np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-3)
        seen.append(weights)
    assert not np.allclose(seen[0], seen[1], atol=1e-3)  # another head: other weights
    assert not np.allclose(seen[1], seen[2], atol=1e-3)  # another layer: other weights

    # decoder self-attention: the future is masked (weight 0, drawn hatched)
    page.select_option("#kind", "decoder")
    page.select_option("#layer", "2")
    page.click(".thumb[data-head='1']")  # choose the head by its thumbnail
    state, weights = shown(page)
    assert state["kind"] == "decoder" and state["layer"] == "2" and state["head"] == "1"
    np.testing.assert_allclose(weights, expected.decoder[2][0, 1].numpy(), atol=1e-3)
    assert np.triu(weights, k=1).max() == 0.0
    assert page.eval_on_selector("#cell-0-1", "c => c.classList.contains('masked')")

    # hovering a query row colours the key chips by what it attends to
    page.select_option("#kind", "cross")
    page.hover("#cell-3-2")
    assert "attends most to" in page.inner_text("#info")
    chip_weights = page.eval_on_selector_all("#key-chips .chip small", "s => s.map(x => +x.textContent)")
    _, weights = shown(page)
    assert chip_weights == [math.floor(100 * w + 0.5) for w in weights[3]]  # JS Math.round
    assert page.eval_on_selector("#heatmap tr[data-q='3']", "r => r.classList.contains('hot')")

    screenshot = tmp_path / "explorer.png"
    page.screenshot(path=str(screenshot), full_page=True)
    assert screenshot.stat().st_size > 20_000
    assert errors == []
    assert all(url.startswith("file:") for url in requests), requests
    page.close()
