"""Alignments in the user's words: source indices count the whitespace-separated words of the input line as
given, whatever the tokenizer drops or normalises (emoji, tabs, repeated spaces, characters outside the
vocabulary), for character, BPE, byte-level BPE and SentencePiece tokenizers. (They counted the words of
the detokenized source: `😀 march 3 2001 ☃ x` aligned `2-0` to "2001", the user's word 3.)"""

from __future__ import annotations

import numpy as np
import pytest

from aiayn.data.tokenizer import Tokenizer
from aiayn.inference import load
from aiayn.inference.torch_translator import TorchTranslator
from aiayn.inference.words import align_words, parse_pharaoh, source_token_words, word_spans

TRAIN = [f"{a} {b} {c}" for a in ("march", "may", "june") for b in ("3", "12", "31")
         for c in ("2001", "1999", "x")]
LINES = [
    "😀 march 3 2001 ☃ x",   # characters outside the vocabulary
    "march\t3\t2001\tx",      # tabs
    "  march   3  2001 x  ",  # repeated, leading and trailing spaces
    "march 3 ÆØ 2001 x",      # a word of characters no vocabulary has
    "may\u30003 x",           # an ideographic space (Unicode whitespace)
]


def sentencepiece_tokenizer(directory) -> Tokenizer:
    spm = pytest.importorskip("sentencepiece", reason="needs the optional extra 'sentencepiece'")
    prefix = directory / "tok"
    spm.SentencePieceTrainer.train(sentence_iterator=iter(TRAIN * 5), model_prefix=str(prefix), vocab_size=30,
                                   hard_vocab_limit=False, minloglevel=2, num_threads=1)
    return Tokenizer.from_spec(str(prefix.with_suffix(".model")))


@pytest.fixture(scope="module", params=["char", "bpe", "byte_bpe", "sentencepiece"])
def tokenizer(request, tmp_path_factory):
    if request.param == "sentencepiece":
        return sentencepiece_tokenizer(tmp_path_factory.mktemp("spm"))
    return Tokenizer.train(request.param, TRAIN * 3, vocab_size=0 if request.param == "char" else 400)


@pytest.mark.parametrize("line", LINES)
def test_each_token_belongs_to_the_word_of_the_line_that_holds_it(tokenizer, line):
    ids, offsets = tokenizer.encode_with_offsets(line)
    assert ids == tokenizer.encode(line)
    words = line.split()
    spans = word_spans(line)
    assert [line[s:e] for s, e in spans] == words
    found = source_token_words(tokenizer, line, len(ids))
    assert len(found) == len(ids)
    for (start, end), word in zip(offsets, found, strict=True):
        if word is None:  # a token of no character of a word (a whitespace marker)
            assert not line[start:end].strip()
        else:
            low, high = spans[word]
            assert low <= start + (len(line[start:end]) - len(line[start:end].lstrip())) < high
    digits = [word for (start, end), word in zip(offsets, found, strict=True) if "2001" in line
              and line.index("2001") <= start < line.index("2001") + 4]
    if digits:  # the tokens of "2001" are in the user's word that "2001" is
        assert set(digits) == {words.index("2001")}


class DroppingTokenizer:
    """A character vocabulary with no `<unk>`: what it cannot represent vanishes (`tokenizers` drops it)."""

    def __init__(self) -> None:
        import tokenizers
        from tokenizers import models, pre_tokenizers

        vocab = {c: i for i, c in enumerate("abcdefghijklmnopqrstuvwxyz0123456789")}
        self.hf = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[]))
        self.hf.pre_tokenizer = pre_tokenizers.Whitespace()

    encode_with_offsets = Tokenizer.encode_with_offsets


def test_a_word_with_no_surviving_token_has_no_link():
    tokenizer, line = DroppingTokenizer(), "😀 march ☃ x"
    ids, _ = tokenizer.encode_with_offsets(line)
    found = source_token_words(tokenizer, line, len(ids))
    assert found == [1, 1, 1, 1, 1, 3]  # the user's words 1 and 3: the emoji and the snowman have no token
    cross = np.zeros((1, 1, 3, len(found) + 1))  # (L, H, output tokens + 1, source tokens + <eos>)
    cross[..., len(found)] = 1.0  # all attention on <eos>, which is left out: every column ties at 0
    assert all(source in (1, 3) for source, _ in align_words(cross, found, [0, 1]))


@pytest.mark.parametrize("line, last_word", [("😀 der 3 hund ☃ ja", 5), ("der\thund\tja", 2),
                                              ("der   hund  ja", 2)])
def test_the_alignment_counts_the_words_of_the_input_line(model_dir, monkeypatch, line, last_word):
    """End to end, with attention planted on the source's last token (of the user's last word)."""

    def on_the_last_source_token(self, sources, targets):
        maps = []
        for source, target in zip(sources, targets, strict=True):
            cross = np.zeros((1, 1, len(target) + 1, len(source) + 1))
            cross[..., len(source) - 1] = 1.0
            maps.append(cross)
        return maps

    monkeypatch.setattr(TorchTranslator, "_cross_attention", on_the_last_source_token)
    translator = load(model_dir, "cpu")
    entry = translator.translate_nbest([line], 1, beam=1, max_len_extra=3, alignments=True)[0][0]
    links = entry.alignment
    assert links and {source for source, _ in links} == {last_word}
    assert parse_pharaoh(" ".join(f"{s}-{t}" for s, t in links)) == links
