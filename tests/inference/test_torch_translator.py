"""`aiayn.load(DIR)` -> `TorchTranslator`: batching, order, empty lines, truncation, scoring."""

import logging

import pytest
import torch

import aiayn
from aiayn import formats
from aiayn.core.errors import CheckpointError, ConfigError
from aiayn.decoding import beam_search
from aiayn.inference import TorchTranslator, Translation, Translator, length_batches
from decoding.conftest import SOURCES, TARGETS
from decoding.helpers import approx


@pytest.fixture(scope="module")
def translator(model_dir):
    loaded = aiayn.load(model_dir, device="cpu")
    assert isinstance(loaded, TorchTranslator) and isinstance(loaded, Translator)
    return loaded


def test_length_batches_respect_the_budget_and_cover_everything():
    lengths = [5, 1, 9, 3, 3, 7, 20]
    batches = length_batches(lengths, batch_tokens=10)
    assert sorted(i for b in batches for i in b) == list(range(7))
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert longest * len(batch) <= 10 or len(batch) == 1
    assert batches[0] == [6]  # longest first, alone over budget


def test_translate_keeps_order_and_empty_lines(translator):
    outputs = translator.translate(SOURCES, max_len_extra=4, batch_tokens=12)
    assert len(outputs) == len(SOURCES) and outputs[2] == ""
    one_by_one = [translator.translate([s], max_len_extra=4)[0] for s in SOURCES]
    assert outputs == one_by_one
    assert all(isinstance(o, str) for o in outputs)
    assert translator.translate([]) == []


def test_nbest_lists(translator):
    nbest = translator.translate_nbest(SOURCES, 3, beam=3, max_len_extra=3)
    blank = translator.score([SOURCES[2]], [""])[0]  # a blank line: its empty output, scored with <eos>
    assert nbest[2] == [Translation("", pytest.approx(blank), [])] and blank < 0
    for i in (0, 1, 3, 4):
        assert 1 <= len(nbest[i]) <= 3
        scores = [t.score for t in nbest[i]]
        assert scores == sorted(scores, reverse=True)
        decoded = translator.tokenizers.target.decode_batch([t.tokens for t in nbest[i]])
        assert [t.text for t in nbest[i]] == decoded
    best = [entries[0].text for entries in nbest]
    assert best == translator.translate(SOURCES, beam=3, max_len_extra=3)
    with pytest.raises(ConfigError, match="nbest"):
        translator.translate_nbest(SOURCES, 3, beam=2)


def test_greedy_score_equals_forced_decoding_score(translator):
    sources = [s for s in SOURCES if s]
    hyps = translator.translate_nbest(sources, 1, beam=1, max_len_extra=3)
    texts = translator.translate(sources, beam=1, max_len_extra=3)
    forced = translator.score(sources, texts)
    cut = [len(h[0].tokens) == len(s) + 1 + 3 for h, s in zip(hyps, sources, strict=True)]
    for h, score, was_cut in zip(hyps, forced, cut, strict=True):
        if not was_cut:  # forced decoding adds <eos>, which a cut-off output never produced
            assert score == approx(h[0].score)


def test_score_pairs(translator):
    scores = translator.score(SOURCES, TARGETS)
    assert len(scores) == len(SOURCES) and all(s < 0 for s in scores)
    assert translator.score(SOURCES[:1], TARGETS[:1])[0] == approx(scores[0])
    with pytest.raises(ConfigError, match="5 sources but 1 targets"):
        translator.score(SOURCES, TARGETS[:1])


def test_long_lines_are_truncated_with_a_warning(translator, caplog):
    long = "ein hund " * 10  # 90 characters; max_len is 48
    with caplog.at_level(logging.WARNING, logger="aiayn.inference"):
        out = translator.translate(["ja", long], beam=2, max_len_extra=2, line_offset=10)
    assert len(out) == 2
    assert "source line 12 has 90 tokens; truncated to 47" in caplog.text


def test_beam_search_is_what_translate_runs(translator):
    ids = [*translator.tokenizers.source.encode("zwei katzen"), translator.model.config.eos_id]
    expected = beam_search(translator.model, torch.tensor([ids]), 4, 0.6, max_len_extra=5)[0][0]
    assert translator.translate(["zwei katzen"], max_len_extra=5) == [
        translator.tokenizers.target.decode(expected.tokens)
    ]


def test_a_language_model_directory_is_refused(tmp_path, model_dir):
    from aiayn.model import DecoderOnlyLM, ModelConfig

    formats.save_pretrained(DecoderOnlyLM(ModelConfig.tiny(vocab_size=40)), tmp_path)
    with pytest.raises(CheckpointError, match="decoder_only"):
        aiayn.load(tmp_path, device="cpu", task="translation")
