"""The report's flags as pure functions, and `build_report` on fabricated outputs: each flag
fires exactly on the sentence where it was planted."""

from __future__ import annotations

import numpy as np
import pytest

from aiayn.core.errors import DataError
from aiayn.evaluation import report_flags as flags
from aiayn.evaluation.report import build_report, decode_attention, encode_attention
from aiayn.evaluation.report_analysis import length_buckets, ratio_histogram, word_accuracy
from aiayn.evaluation.report_flags import FLAGS, FlagSettings

from .conftest import NO_ATTENTION, OMITTED, UNKNOWN_POSITION, cross_attention, fabricated, planted


def test_omission_finds_the_source_token_no_output_attends_to():
    cross = cross_attention(5, 6, dropped=3)
    assert flags.omission(cross, 0.2) == [3]
    assert flags.omission(cross_attention(5, 6, None), 0.2) == []
    mass = flags.attention_mass(cross)
    assert mass.shape == (6,) and mass.sum() == pytest.approx(5.0, abs=1e-5)  # each of 5 rows sums to 1
    # the last column (<eos>) is never flagged, even with no attention at all
    assert flags.omission(cross_attention(5, 6, dropped=5), 0.2) == []


def test_omission_counts_whole_words_and_skips_punctuation():
    cross = cross_attention(4, 6, dropped=[1])  # tokens: ▁der ▁ro te ▁hund ▁, </s>
    words = flags.token_words("der rote hund ,", ["▁der", "▁ro", "te", "▁hund", "▁,"])
    assert words == [0, 1, 1, 2, 3]
    assert flags.omission(cross, 0.2, words) == []  # "te" carries the word "rote"
    cross = cross_attention(4, 6, dropped=[1, 2, 4])
    assert flags.omission(cross, 0.2, words) == [1, 2, 4]
    assert flags.omission(cross, 0.2, words, checked=[True, True, True, False]) == [1, 2]
    assert flags.token_words("ein ☃ hund", ["▁ein", "<unk>", "▁hund"]) == [0, 0, 2]


def test_repetition_counts_ngrams_beyond_the_reference():
    hyp = ["a", "man", "a", "man", "rides", "a", "bike"]
    assert flags.repetition(hyp, ["a", "man", "rides", "a", "bike"], 2) == ["a man"]
    assert (
        flags.repetition(hyp, ["a", "man", "and", "a", "man", "ride"], 2) == []
    )  # the reference repeats it too
    assert flags.repetition(["the", "dog", "the", "dog", "the", "dog"], None, 2) == ["the dog the dog"]
    assert flags.repetition(["the", "the", "cat"], ["the", "cat"], 2) == ["the the"]
    assert flags.repetition(["a", "b", "c", "a", "b", "c"], ["a", "b", "c"], 4) == []  # only 3-grams repeat


def test_length_band_and_ratio():
    assert flags.length_ratio(1, 7) == pytest.approx(1 / 7)
    assert flags.length_ratio(3, 0) is None
    assert flags.length(1 / 7, 0.6, 1.5) and flags.length(2.0, 0.6, 1.5)
    assert not flags.length(1.0, 0.6, 1.5) and not flags.length(None, 0.6, 1.5)


def test_unknown_tokens_and_byte_fallbacks():
    tokens, ids = ["▁a", "<unk>", "<0xE2>", "<0x41", "b"], [5, 3, 40, 41, 6]
    assert flags.unknown(tokens, ids, unk_id=3) == [1, 2]
    assert flags.unknown(tokens, ids, unk_id=None) == [2]


def test_copy_and_the_tokens_it_highlights():
    source, hyp, ref = ["die", "Katze", "schläft"], ["the", "Katze", "sleeps"], ["the", "cat", "sleeps"]
    assert flags.copy(source, hyp, ref, 4) == ["Katze"]
    assert flags.copy(source, hyp, ["the", "Katze", "sleeps"], 4) == []  # the reference keeps it: a name
    assert flags.copy(source, hyp, ref, 6) == []
    assert flags.copied_token_positions(
        "die Katze schläft", ["▁die", "▁Kat", "ze", "▁schläft"], ["Katze"]
    ) == [1, 2]
    assert flags.copied_token_positions("ab ab", list("ab ab"), ["ab"]) == [0, 1, 3, 4]


def test_attention_round_trip_to_a_byte():
    cross = cross_attention(4, 5, None)
    encoded = encode_attention(cross)
    assert encoded["shape"] == [2, 2, 4, 5]
    np.testing.assert_allclose(decode_attention(encoded), cross, atol=0.5 / 255 + 1e-7)


def test_each_flag_fires_exactly_where_planted():
    sources, references, outputs = fabricated()
    data = build_report(sources, references, outputs, FlagSettings())
    fired = {s["id"]: set(s["flags"]) for s in data["sentences"]}
    assert fired == planted()
    assert data["corpus"]["flag_counts"] == {name: 1 for name in FLAGS}
    by_id = data["sentences"]
    assert by_id[1]["highlight"] == OMITTED and by_id[1]["flags"]["omission"] == "rote (0.00)"
    assert by_id[2]["flags"]["repetition"] == "a man"
    assert by_id[4]["highlight"] == [UNKNOWN_POSITION] and by_id[4]["flags"]["unknown"] == "<unk>"
    assert by_id[5]["flags"]["copy"] == "Katze" and by_id[5]["highlight"] == [1]
    assert by_id[NO_ATTENTION]["unavailable"] == ["omission"] and by_id[NO_ATTENTION]["attention"] is None
    assert all(s["unavailable"] == [] for s in by_id if s["id"] != NO_ATTENTION)
    assert by_id[3]["ratio"] == pytest.approx(1 / 7, abs=1e-4)
    assert by_id[0]["chrf"] == 100.0 and by_id[0]["bleu"] == 100.0
    assert data["flags"]["omission"]["available"] and "0.2" in data["flags"]["omission"]["description"]


def test_thresholds_change_what_fires():
    sources, references, outputs = fabricated()
    strict = FlagSettings(length_low=0.1, copy_min_chars=6, repetition_ngram=3, omission_threshold=0.0)
    fired = {
        s["id"]: set(s["flags"]) for s in build_report(sources, references, outputs, strict)["sentences"]
    }
    assert fired == {i: ({"unknown"} if i == 4 else set()) for i in range(len(sources))}


def test_without_reference_and_without_attention():
    sources, _, outputs = fabricated()
    for sentence in outputs.sentences:
        sentence.cross = None
    outputs.attention_note = "unavailable: a CTranslate2 model"
    data = build_report(sources, None, outputs)
    assert not data["has_reference"] and "bleu" not in data["corpus"] and "words" not in data
    assert data["flags"]["omission"] == {
        "description": data["flags"]["omission"]["description"],
        "available": False,
        "note": "unavailable: a CTranslate2 model",
    }
    assert data["corpus"]["flag_counts"]["omission"] is None
    assert all("omission" in s["unavailable"] for s in data["sentences"])
    assert "copy" in data["sentences"][5]["flags"]  # against the source alone


def test_mismatched_inputs_are_one_line_errors():
    sources, references, outputs = fabricated()
    with pytest.raises(DataError, match="7 sources but 6 references"):
        build_report(sources, references[:-1], outputs)
    with pytest.raises(DataError, match="compared system has 2 lines"):
        build_report(sources, references, outputs, compare=["a", "b"])


def test_corpus_views():
    histogram = ratio_histogram([0.05, 1.0, 1.04, 2.5, None])
    counts = {b["label"]: b["count"] for b in histogram}
    assert counts["0.0"] == 1 and counts["1.0"] == 2 and counts["2.0+"] == 1 and sum(counts.values()) == 4
    buckets = length_buckets([3, 4, 12], ["a b", "c d", "e f"], ["a b", "x y", "e f"], False)
    assert [(b["label"], b["sentences"]) for b in buckets] == [("1-5", 2), ("11-15", 1)]
    assert buckets[1]["chrf"] == 100.0
    words = word_accuracy([["the", "dog", "dog"], ["a", "cat"]], [["the", "dog"], ["the", "cat"]])
    scores = {w["word"]: w["f"] for w in words["best"]}
    assert scores == {"the": pytest.approx(2 * 1 * 0.5 / 1.5, abs=1e-4)}  # words seen twice in refs
    assert words["never_in_reference"] == [{"word": "a", "hypothesis_count": 1}]
    labels = {b["label"]: b for b in words["buckets"]}
    assert labels["1"]["words"] == 2 and labels["1"]["recall"] == 1.0  # dog, cat
    assert labels["1"]["precision"] == pytest.approx(2 / 3, abs=1e-4)
