"""Constraints on the trained `dates` model: unused, they change nothing (and the constrained
search with nothing to honour is the plain search, output for output and score for score);
used, an included phrase is in every output and an excluded one in none."""

from __future__ import annotations

import torch

from aiayn.core.eval_mode import eval_mode
from aiayn.decoding.constrained_search import constrained_beam_search
from aiayn.decoding.constraints import NO_CONSTRAINTS
from aiayn.decoding.controls import NO_CONTROLS
from aiayn.inference import load
from shared_dates import splits

COUNT = 40


def sources() -> list[str]:
    return [source for source, _ in splits()["test"][:COUNT]]


def test_unused_constraints_change_nothing(dates_run, monkeypatch):
    translator = load(dates_run, "cpu")
    texts = sources()
    plain = translator.translate_nbest(texts, 2, beam=4)
    unused = translator.translate_nbest(texts, 2, beam=4, include=[None] * COUNT, exclude=[[]] * COUNT)
    assert unused == plain

    def through_the_constrained_search(runner, src, beam_size, alpha, max_len_extra, nbest, **kw):
        config = runner.config  # the translator's step runner (`aiayn.runtime.steps`)
        with eval_mode(runner.network), torch.no_grad():
            return constrained_beam_search(
                runner, src, [NO_CONSTRAINTS] * src.size(0), beam_size, alpha, max_len_extra, nbest, None,
                config.bos_id, config.eos_id, kw.get("controls", NO_CONTROLS), kw.get("prefixes"),
            )

    monkeypatch.setattr("aiayn.inference.torch_translator.beam_search", through_the_constrained_search)
    allocated = translator.translate_nbest(texts, 2, beam=4)
    assert [[t.text for t in hyps] for hyps in allocated] == [[t.text for t in hyps] for hyps in plain]
    assert [[t.score for t in hyps] for hyps in allocated] == [[t.score for t in hyps] for hyps in plain]


def test_included_phrases_are_kept_and_excluded_ones_avoided(dates_run):
    translator = load(dates_run, "cpu")
    texts = sources()[:12]
    plain = translator.translate(texts, beam=4)
    out = translator.translate_nbest(texts, 1, beam=4, include=[["1999"]] * len(texts),
                                     exclude=[[hyp[:4]] for hyp in plain])
    for hyps, before in zip(out, plain, strict=True):
        assert "1999" in hyps[0].text and hyps[0].constraints_met
        assert before[:4] not in hyps[0].text or before[:4] == "1999"
