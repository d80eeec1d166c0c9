"""`translate_nbest(..., token_scores=True, alignments=True)`: per-token scores and word
alignments with every `Translation` (`aiayn.inference.words`), on a random tiny model."""

from __future__ import annotations

import pytest

import aiayn
from aiayn.data import Tokenizer
from aiayn.inference.words import align_words, parse_pharaoh, pharaoh, token_words, word_scores
from decoding.conftest import SOURCES

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def translator(model_dir):
    return aiayn.load(model_dir, device="cpu")


@pytest.mark.parametrize("beam", [1, 3])
def test_token_scores_sum_to_the_forced_score_of_each_output(translator, beam):
    nbest = translator.translate_nbest(SOURCES, nbest=beam, beam=beam, max_len_extra=4, token_scores=True)
    for source, entries in zip(SOURCES, nbest, strict=True):
        for entry in entries:  # a blank source too: its empty output, scored with its <eos>
            assert len(entry.token_scores) == len(entry.tokens) + 1  # <eos> last
            assert all(score <= 0 for score in entry.token_scores)
            forced = translator.score([source], [entry.text])[0]
            assert sum(entry.token_scores) == pytest.approx(forced, abs=TOLERANCE)


def test_greedy_token_scores_are_the_search_own_log_probabilities(translator):
    """Without controls, greedy search's score is the sum of its chosen tokens' log-probabilities
    (`<eos>` included, unless the output was cut at its length limit): the teacher-forced token
    scores give the same sum."""
    nbest = translator.translate_nbest(SOURCES, nbest=1, beam=1, max_len_extra=4, token_scores=True)

    for source, entries in zip(SOURCES, nbest, strict=True):
        entry = entries[0]
        if not source.strip():
            continue
        at_limit = len(entry.tokens) == translator.count_tokens([source])[0] + 4

        searched = entry.token_scores[:-1] if at_limit else entry.token_scores
        assert sum(searched) == pytest.approx(entry.score, abs=TOLERANCE)


def test_the_default_path_leaves_the_fields_empty(translator):
    entry = translator.translate_nbest(SOURCES[:1], nbest=1)[0][0]
    assert entry.token_scores is None and entry.alignment is None


def test_alignments_link_every_output_word_to_a_source_word(translator):
    nbest = translator.translate_nbest(SOURCES, nbest=2, beam=2, max_len_extra=4, alignments=True)
    for source, entries in zip(SOURCES, nbest, strict=True):
        for entry in entries:
            assert entry.token_scores is None
            links = entry.alignment
            assert parse_pharaoh(pharaoh(links)) == links
            if entry.text.split() and source.split():
                assert sorted({t for _, t in links}) == list(range(len(entry.text.split())))
                assert all(0 <= s < len(source.split()) for s, _ in links)


def test_subwords_are_merged_into_words_of_a_bpe_tokenizer():
    texts = ["the quick brown fox jumps over the lazy dog"] * 20 + ["unbelievable antidisestablishment"]
    tokenizer = Tokenizer.train("bpe", texts, vocab_size=300, min_frequency=1)
    text = "unbelievable fox antidisestablishment"
    ids = tokenizer.encode(text)
    words = token_words(tokenizer, ids)
    assert len(ids) > 3  # subwords: more tokens than words
    assert words == sorted(words) and words[0] == 0 and words[-1] == 2
    for word in range(3):
        pieces = [i for i, w in zip(ids, words, strict=True) if w == word]
        assert tokenizer.decode(pieces).strip() == text.split()[word]
    assert word_scores([-1.0] * len(ids) + [-5.0], words) == [-float(words.count(w)) for w in range(3)]


def test_align_words_follows_the_attention_of_merged_subwords():
    """Output word 0 (tokens 0, 1) attends to source word 1 (token 2); output word 1 to source word 0."""
    import numpy as np

    cross = np.zeros((2, 2, 4, 4))  # (L, H, T = <bos> + 3 tokens, S = 3 tokens + <eos>)
    cross[-1, :, 0, 2] = cross[-1, :, 1, 2] = cross[-1, :, 2, 0] = 1.0
    cross[0, :, :, 1] = 5.0  # another layer's attention plays no part
    assert align_words(cross, [0, 0, 1], [0, 0, 1]) == [(1, 0), (0, 1)]


@pytest.mark.parametrize("bad", ["0-", "a-1", "1_2", "-1-2"])
def test_parse_pharaoh_names_a_bad_pair(bad):
    with pytest.raises(ValueError, match="Pharaoh"):
        parse_pharaoh(f"0-0 {bad}")


def test_a_temperature_below_float32_range_samples_the_arg_max(translator):
    """5e-324 is 0 in float32: dividing by it gave nan probabilities (found by the schema fuzz)."""
    tiny = translator.translate(SOURCES, beam=1, max_len_extra=4, sample=True, temperature=5e-324, seed=1)
    arg_max = translator.translate(SOURCES, beam=1, max_len_extra=4, sample=True, temperature=0.0, seed=1)
    assert tiny == arg_max
