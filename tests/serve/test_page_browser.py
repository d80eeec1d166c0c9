"""The service's page in a real headless Chromium: type a sentence, see the translation and
its attention (the model's own weights, to 1e-3), switch layer and head; a language model's
page generates and shows the masked self-attention. Nothing is fetched from another origin.

Browser set-up (and when the test skips): tests/browser_setup.py. Select with `-m browser`.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from aiayn import formats
from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer import JOINT_FILE, Tokenizer
from aiayn.inference import TorchGenerator, load
from aiayn.model import DecoderOnlyLM
from browser_setup import headless_chromium

from .conftest import SOURCES

pytest.importorskip("fastapi", reason="the 'serve' extra is not installed (pip install -e '.[serve]')")
from .helpers import ThreadedServer

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser():
    with headless_chromium() as browser:
        yield browser


def shown(page) -> tuple[dict, np.ndarray]:
    """The heatmap's state (sentence, kind, layer, head) and its weights (queries, keys)."""
    state = page.eval_on_selector("#heatmap", "t => ({...t.dataset})")
    cells = page.eval_on_selector_all(
        "#heatmap td[data-weight]", "cs => cs.map(c => [+c.dataset.q, +c.dataset.k, +c.dataset.weight])"
    )
    assert cells, "the attention map is empty"
    weights = np.full((max(c[0] for c in cells) + 1, max(c[1] for c in cells) + 1), np.nan)
    for q, k, w in cells:
        weights[q, k] = w
    assert not np.isnan(weights).any()
    return state, weights


def watch(page) -> tuple[list[str], list[str]]:
    """Every URL the page requests, and every error its scripts raise."""
    requests, errors = [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on("pageerror", lambda error: errors.append(str(error)))
    return requests, errors


def test_type_a_sentence_see_its_translation_and_attention(browser, translation_dir):
    translator = load(translation_dir, "cpu")
    config, target_tokenizer = translator.model.config, translator.tokenizers.target

    def reference(source: str):
        tokens = translator.translate_nbest([source], 1, beam=4)[0][0].tokens[: config.max_len - 1]
        src = torch.tensor([[*translator.tokenizers.source.encode(source), config.eos_id]])
        maps = translator.model.attention_maps(src, torch.tensor([[config.bos_id, *tokens]]))
        return target_tokenizer.decode(tokens), maps

    with ThreadedServer(translation_dir) as server:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        requests, errors = watch(page)
        page.goto(server.url)
        page.wait_for_selector("body[data-ready='1']")
        assert "translation model" in page.inner_text("#model-summary")
        assert page.is_hidden("#view")

        page.fill("#input", SOURCES[0])
        page.press("#input", "Enter")
        page.wait_for_selector("#heatmap[data-sentence='1']")
        translation, maps = reference(SOURCES[0])
        assert page.inner_text("#output") == translation
        # the default view: encoder-decoder attention, last layer, average of heads
        state, weights = shown(page)
        assert state == {"sentence": "1", "kind": "cross", "layer": "2", "head": "mean"}
        np.testing.assert_allclose(weights, maps.cross[2][0].mean(dim=0).numpy(), atol=1e-3)

        seen = []
        for kind, layer, head in [("cross", 0, 1), ("cross", 0, 0), ("encoder", 1, 1)]:
            page.select_option("#kind", kind)
            page.select_option("#layer", str(layer))
            page.select_option("#head", str(head))
            state, weights = shown(page)
            assert state == {"sentence": "1", "kind": kind, "layer": str(layer), "head": str(head)}
            np.testing.assert_allclose(weights, getattr(maps, kind)[layer][0, head].numpy(), atol=1e-3)
            seen.append(weights)
        assert not np.allclose(seen[0], seen[1], atol=1e-3)  # another head: other weights
        page.click(".thumb[data-head='0']")  # a head chosen by its thumbnail
        state, weights = shown(page)
        assert state["head"] == "0"
        np.testing.assert_allclose(weights, maps.encoder[1][0, 0].numpy(), atol=1e-3)

        # a second sentence keeps the chosen view
        page.fill("#input", SOURCES[2])
        page.click("#submit")
        page.wait_for_selector("#heatmap[data-sentence='2']")
        translation, maps = reference(SOURCES[2])
        assert page.inner_text("#output") == translation
        state, weights = shown(page)
        assert state == {"sentence": "2", "kind": "encoder", "layer": "1", "head": "0"}
        np.testing.assert_allclose(weights, maps.encoder[1][0, 0].numpy(), atol=1e-3)

        # the service's error is shown, not thrown
        page.fill("#input", "a" * 60)
        page.press("#input", "Enter")
        page.wait_for_selector("#status.error")
        assert "the model takes at most 40" in page.inner_text("#status")
        page.close()
    assert errors == []
    assert requests and all(url.startswith(server.url) for url in requests), requests


def test_a_language_models_page_generates_and_shows_self_attention(browser, lm_dir):
    model = formats.from_pretrained(DecoderOnlyLM, lm_dir)
    tokenizer = Tokenizer.load(lm_dir / JOINT_FILE, SpecialTokens.of(model.config))
    with ThreadedServer(lm_dir) as server:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        requests, errors = watch(page)
        page.goto(server.url)
        page.wait_for_selector("body[data-ready='1']")
        assert page.inner_text("#submit") == "Generate"
        assert "language model" in page.inner_text("#model-summary")
        page.fill("#input", "the cat")
        page.fill("#max-new-tokens", "12")
        page.fill("#seed", "3")
        page.click("#submit")
        page.wait_for_selector("#heatmap[data-sentence='1']")
        continuation = TorchGenerator(model, tokenizer).generate("the cat", 12, 0.8, None, None, 3)
        assert page.inner_text("#output mark") == continuation
        state, weights = shown(page)
        assert state["kind"] == "decoder" and state["layer"] == "1"
        assert page.eval_on_selector("#kind option[value='cross']", "o => o.disabled")
        text_ids = tokenizer.encode("the cat" + continuation)
        maps = model.attention_maps(torch.tensor([text_ids]))
        np.testing.assert_allclose(weights, maps[1][0].mean(dim=0).numpy(), atol=1e-3)
        assert np.triu(weights, k=1).max() == 0.0
        page.close()
    assert errors == []
    assert all(url.startswith(server.url) for url in requests), requests


def test_the_page_asks_for_the_api_key_when_the_service_wants_one(browser, translation_dir):
    with ThreadedServer(translation_dir, api_key="s3cret") as server:
        page = browser.new_page()
        _, errors = watch(page)
        page.goto(server.url)
        page.wait_for_selector("body[data-ready='1']")
        assert page.is_visible("#api-key-row") and "API key" in page.inner_text("#status")
        page.fill("#api-key", "s3cret")
        page.press("#api-key", "Tab")  # the key is taken on change
        page.wait_for_selector("#model-summary:has-text('translation model')")  # no eval: the CSP forbids it
        page.fill("#input", SOURCES[1])
        page.press("#input", "Enter")
        page.wait_for_selector("#heatmap[data-sentence='1']")
        assert shown(page)[1].size > 0
        page.close()
    assert errors == []
