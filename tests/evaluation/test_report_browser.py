"""The report page in a real headless Chromium: each flag on the right sentence, sorting,
filtering, a clicked sentence's attention cells, the page against OUT.json, and no network.

Two reports: one of fabricated outputs (`conftest.CASES`, one planted flag per sentence) and
one of the trained dates model (`dates_run`, tests/shared_dates.py). The browser set-up (and
when the test skips) is tests/browser_setup.py; select these alone with `pytest -m browser`.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import aiayn
from aiayn.cli.main import main
from aiayn.evaluation.report import build_report, decode_attention
from aiayn.evaluation.report_flags import FLAGS
from aiayn.evaluation.report_page import write_report
from browser_setup import headless_chromium

from .conftest import NO_ATTENTION, OMITTED, fabricated, planted

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser():
    with headless_chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def fabricated_page(tmp_path_factory):
    sources, references, outputs = fabricated()
    path = tmp_path_factory.mktemp("fab") / "r.html"
    page, _ = write_report(build_report(sources, references, outputs), path)
    return page


def open_page(browser, path):
    """The page, loaded, with lists collecting its requests and script errors."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.requests, page.errors = [], []
    page.on("request", lambda request: page.requests.append(request.url))
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready='1']")
    return page


def rows(page, visible_only=False) -> list[dict]:
    """Every row of the sentence table as the page shows it."""
    return page.eval_on_selector_all(
        "#sentences-body tr",
        """(trs, visibleOnly) => trs.filter(tr => !visibleOnly || !tr.hidden).map(tr => {
            const cell = (c) => {
                const td = tr.querySelector('td.c-' + c);
                return td ? td.textContent : null;
            };
            return {id: +tr.dataset.id, source: cell('source'), hypothesis: cell('hypothesis'),
                    reference: cell('reference'), chrf: cell('chrf'), bleu: cell('bleu'),
                    ratio: cell('ratio'),
                    flags: [...tr.querySelectorAll('span.flag:not(.unavailable)')].map(s => s.dataset.flag),
                    unavailable: [...tr.querySelectorAll('span.flag.unavailable')].map(s => s.dataset.flag),
                    tooltips: [...tr.querySelectorAll('span.flag')].map(s => s.title)};
        })""",
        visible_only,
    )


def show_sentence(page, sentence_id: int, state: str) -> None:
    """Click a sentence's row and wait until its attention is drawn (or said unavailable)."""
    page.click(f"#sentences-body tr[data-id='{sentence_id}']")
    page.wait_for_selector(f"#attention-card[data-sentence='{sentence_id}'][data-state='{state}']")


def heatmap(page) -> tuple[dict, np.ndarray]:
    """The heatmap's state and its weights (queries, keys)."""
    state = page.eval_on_selector("#heatmap", "t => ({...t.dataset})")
    cells = page.eval_on_selector_all(
        "#heatmap td[data-weight]", "cs => cs.map(c => [+c.dataset.q, +c.dataset.k, +c.dataset.weight])"
    )
    weights = np.full((max(c[0] for c in cells) + 1, max(c[1] for c in cells) + 1), np.nan)
    for q, k, w in cells:
        weights[q, k] = w
    assert not np.isnan(weights).any()
    return state, weights


def fmt(value, digits=2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def assert_page_matches_json(page, data):
    """Every figure and row the page shows is the JSON's."""
    shown = rows(page)
    assert len(shown) == len(data["sentences"])
    for row in shown:
        s = data["sentences"][row["id"]]
        assert (row["source"], row["hypothesis"]) == (s["source"], s["hypothesis"])
        if data["has_reference"]:
            assert row["reference"] == s["reference"]
            assert (row["chrf"], row["bleu"]) == (fmt(s["chrf"]), fmt(s["bleu"]))
        assert row["ratio"] == fmt(s["ratio"], 3)
        assert row["flags"] == [f for f in FLAGS if f in s["flags"]]
        assert set(row["unavailable"]) == set(s["unavailable"]) | {
            f for f in FLAGS if not data["flags"][f]["available"]
        }
    bold_text = "xs => Object.fromEntries(xs.map(x => [x.dataset.KEY, x.querySelector('b').textContent]))"
    figures = page.eval_on_selector_all("#figures .figure", bold_text.replace("KEY", "figure"))
    corpus = data["corpus"]
    assert figures["sentences"] == str(corpus["sentences"])
    if data["has_reference"]:
        assert (figures["bleu"], figures["chrf"]) == (fmt(corpus["bleu"]), fmt(corpus["chrf"]))
        assert figures["length_ratio"] == fmt(corpus["length_ratio"], 3)
        assert corpus["bleu_signature"] in page.inner_text("#bleu-signature")
    counts = page.eval_on_selector_all(".flag-count", bold_text.replace("KEY", "flag"))
    assert counts == {
        f: "unavailable" if corpus["flag_counts"][f] is None else str(corpus["flag_counts"][f]) for f in FLAGS
    }


def test_fabricated_report(browser, fabricated_page):
    data = json.loads(fabricated_page.with_suffix(".json").read_text(encoding="utf-8"))
    page = open_page(browser, fabricated_page)
    assert_page_matches_json(page, data)

    # each flag on the sentence it was planted in, and nowhere else; each with its tooltip
    shown = {row["id"]: row for row in rows(page)}
    assert {i: set(row["flags"]) for i, row in shown.items()} == planted()
    assert shown[NO_ATTENTION]["unavailable"] == ["omission"]
    assert any("rote (0.00)" in t and "cross-attention" in t for t in shown[1]["tooltips"])

    # sort by chrF (ascending, then descending)
    page.click("#sentences th[data-sort='chrf']")
    values = [float(row["chrf"]) for row in rows(page)]
    assert values == sorted(values) and values[0] < values[-1]
    page.click("#sentences th[data-sort='chrf']")
    assert [float(row["chrf"]) for row in rows(page)] == sorted(values, reverse=True)
    assert page.eval_on_selector("#sentences", "t => t.dataset.order") == "desc"

    # filter by each flag: only its sentence stays visible
    for flag in FLAGS:
        page.select_option("#flag-filter", flag)
        assert [row["id"] for row in rows(page, visible_only=True)] == [
            i for i, flags in planted().items() if flag in flags
        ]
    page.select_option("#flag-filter", "all")

    # click the omission sentence: its attention, the omitted source token outlined
    show_sentence(page, 1, "shown")
    state, weights = heatmap(page)
    assert state == {"sentence": "1", "kind": "cross", "layer": "1", "head": "mean"}
    cross = decode_attention(data["sentences"][1]["attention"])
    np.testing.assert_allclose(weights, cross[1].mean(axis=0), atol=1e-5)
    assert np.allclose(weights[:, OMITTED], 0.0)
    flagged = page.eval_on_selector_all("#heatmap thead th.flagged", "ths => ths.map(th => +th.dataset.k)")
    assert flagged == OMITTED
    page.select_option("#layer", "0")
    page.select_option("#head", "1")
    _, weights = heatmap(page)
    np.testing.assert_allclose(weights, cross[0, 1], atol=1e-5)
    flagged = page.eval_on_selector_all("#heatmap thead th.flagged", "ths => ths.map(th => +th.dataset.k)")
    assert flagged == OMITTED  # kept on redraw

    # a sentence without attention says so
    show_sentence(page, NO_ATTENTION, "unavailable")
    assert "unavailable" in page.inner_text("#attention-note")

    assert page.errors == []
    assert all(url.startswith("file:") for url in page.requests), page.requests
    page.close()


def test_report_of_a_model_without_attention(browser, tmp_path):
    """As for a CTranslate2 model: the omission flag and the attention view say unavailable."""
    sources, references, outputs = fabricated()
    for sentence in outputs.sentences:
        sentence.cross = None
    outputs.attention_note = "unavailable: a CTranslate2 model has no per-head attention"
    path, _ = write_report(build_report(sources, references, outputs), tmp_path / "ct2.html")
    data = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    page = open_page(browser, path)
    assert_page_matches_json(page, data)
    assert page.inner_text(".flag-count[data-flag='omission'] b") == "unavailable"
    assert all(row["unavailable"] == ["omission"] for row in rows(page))
    show_sentence(page, 0, "unavailable")
    assert "CTranslate2" in page.inner_text("#attention-note")
    assert page.errors == []
    assert all(url.startswith("file:") for url in page.requests), page.requests
    page.close()


def test_dates_model_report(browser, dates_run, tmp_path):
    """A real model: the page shows the JSON; planted problems (a character the vocabulary lacks,
    a reference of the wrong length) are flagged on their lines; the attention cells of a clicked
    sentence are the model's own."""
    sources = ["Saturday, 21 November 2026", "21.11.26", "☃ March 3rd, 1999", "2 Jan 2001", "12/05/2010"]
    long_reference = "2001-01-02 is a Tuesday in January"
    references = ["2026-11-21", "2026-11-21", "1999-03-03", long_reference, "2010-05-12"]
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("\n".join(sources) + "\n", encoding="utf-8")
    ref.write_text("\n".join(references) + "\n", encoding="utf-8")
    out = tmp_path / "dates.html"
    argv = ["evaluate", "--model", str(dates_run), "--input", str(src), "--ref", str(ref), "--device", "cpu",
            "--report", str(out)]
    assert main(argv) == 0
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    page = open_page(browser, out)
    assert_page_matches_json(page, data)
    shown = {row["id"]: set(row["flags"]) for row in rows(page)}
    assert "unknown" in shown[2] and "length" in shown[3]
    assert data["sentences"][0]["hypothesis"] == "2026-11-21"

    page.select_option("#flag-filter", "unknown")
    assert [row["id"] for row in rows(page, visible_only=True)] == [
        s["id"] for s in data["sentences"] if "unknown" in s["flags"]
    ]
    page.click("#sentences th[data-sort='chrf']")
    page.select_option("#flag-filter", "all")
    values = [float(row["chrf"]) for row in rows(page)]
    assert values == sorted(values)

    show_sentence(page, 0, "shown")
    translator = aiayn.load(dates_run, "cpu", task="translation")
    config = translator.model.config
    src_ids = [*translator.tokenizers.source.encode(sources[0]), config.eos_id]
    tgt_ids = [config.bos_id, *translator.tokenizers.target.encode(data["sentences"][0]["hypothesis"])]
    import torch

    translator.model.eval()
    with torch.no_grad():
        maps = translator.model.attention_maps(torch.tensor([src_ids]), torch.tensor([tgt_ids]))
    last = config.num_decoder_layers - 1
    state, weights = heatmap(page)
    assert state["kind"] == "cross" and state["layer"] == str(last) and state["head"] == "mean"
    np.testing.assert_allclose(weights, maps.cross[last][0].mean(dim=0).numpy(), atol=1 / 255)
    page.select_option("#head", "0")
    _, weights = heatmap(page)
    np.testing.assert_allclose(weights, maps.cross[last][0, 0].numpy(), atol=0.5 / 255 + 1e-6)
    assert page.errors == []
    assert all(url.startswith("file:") for url in page.requests), page.requests
    page.close()


def test_dates_model_report_shows_per_word_scores(browser, dates_run, tmp_path):
    """Clicking a sentence shows each hypothesis word with the model's log-probability (its
    tokens' token scores summed); words under probability 0.5 are coloured (class "low")."""
    sources = ["Saturday, 21 November 2026", "zq xv 0", "2 Jan 2001"]
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("\n".join(sources) + "\n", encoding="utf-8")
    ref.write_text("2026-11-21\n2000-01-01\n2001-01-02\n", encoding="utf-8")
    out = tmp_path / "scores.html"
    argv = ["evaluate", "--model", str(dates_run), "--input", str(src), "--ref", str(ref), "--device", "cpu",
            "--report", str(out)]
    assert main(argv) == 0
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    translator = aiayn.load(dates_run, "cpu", task="translation")
    expected = translator.translate_nbest(sources, 1, token_scores=True)
    page = open_page(browser, out)
    low_seen = 0
    for i, entries in enumerate(expected):
        show_sentence(page, i, "shown")
        spans = page.eval_on_selector_all(
            "#word-scores span.word",
            "ss => ss.map(s => [s.textContent, +s.dataset.score, s.classList.contains('low')])",
        )
        assert [word for word, _, _ in spans] == entries[0].text.split()
        # one word per date here (no spaces): its score is every token's but <eos>
        assert spans[0][1] == pytest.approx(sum(entries[0].token_scores[:-1]), abs=1e-3)
        assert [low for _, _, low in spans] == [np.exp(score) < 0.5 for _, score, _ in spans]
        low_seen += sum(low for _, _, low in spans)
        assert [w for w, _ in data["sentences"][i]["word_scores"]] == entries[0].text.split()
    assert low_seen >= 1  # the garbage source's output is doubtful
    assert page.errors == []
    page.close()
