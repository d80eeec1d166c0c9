"""SentencePiece tokenizers: a `.model` file wherever `data.tokenizer` takes a tokenizer.json,
kept in the model directory (tokenizer.model) and read back with the same ids."""

from __future__ import annotations

import pytest

from aiayn.core.errors import DataError
from aiayn.data.sentencepiece_tokenizer import SentencePieceTokenizer
from aiayn.data.tokenizer import Tokenizer, TokenizerPair

spm = pytest.importorskip("sentencepiece", reason="needs the optional extra 'sentencepiece'")

TEXTS = [f"{a} {b} {c}" for a in ("the", "a", "one") for b in ("small", "big", "red")
         for c in ("cat", "dog", "house")]


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("spm") / "tok"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TEXTS * 5), model_prefix=str(prefix), vocab_size=40, hard_vocab_limit=False,
        character_coverage=1.0, minloglevel=2, num_threads=1,
    )
    return prefix.with_suffix(".model")


def test_model_file_is_a_tokenizer(model_file):
    tokenizer = Tokenizer.from_spec(str(model_file))
    assert isinstance(tokenizer, SentencePieceTokenizer)
    ids = tokenizer.encode("the red cat")
    assert ids and tokenizer.decode(ids) == "the red cat"
    specials = tokenizer.specials
    assert specials.pad_id == tokenizer.vocab_size - 1  # SentencePiece trains no <pad>: appended
    assert specials.pad_id not in ids and specials.unk_id == 0
    texts = ["a dog", "one house"]
    assert tokenizer.encode_batch(texts) == [tokenizer.encode(text) for text in texts]


def test_pair_saves_and_loads_with_the_same_ids(model_file, tmp_path):
    pair = TokenizerPair.from_spec(str(model_file), [], [], 0)
    assert pair.is_joint
    pair.save(tmp_path)
    assert (tmp_path / "tokenizer.model").is_file() and not (tmp_path / "tokenizer.json").exists()
    again = TokenizerPair.load(tmp_path, pair.specials)
    assert again.source.encode("one big dog") == pair.source.encode("one big dog")
    loaded = Tokenizer.load(tmp_path / "tokenizer.json", pair.specials)  # a model directory's name
    assert loaded.encode("a cat") == pair.source.encode("a cat")


def test_vocabulary_larger_than_the_model_is_refused(model_file):
    tokenizer = Tokenizer.load(model_file)
    with pytest.raises(DataError, match=r"tok\.model.*has no row in the model's embedding of 10 tokens"):
        tokenizer.check_fits(10)


def test_not_a_sentencepiece_file(tmp_path):
    (tmp_path / "bad.model").write_text("not a model")
    with pytest.raises(DataError, match=r"bad\.model: not a SentencePiece model"):
        Tokenizer.load(tmp_path / "bad.model")


def test_fingerprint_changes_with_the_model_or_the_ids(model_file, tmp_path):
    tokenizer = Tokenizer.load(model_file)
    assert tokenizer.fingerprint() == Tokenizer.load(model_file).fingerprint()
    prefix = tmp_path / "other"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TEXTS * 5), model_prefix=str(prefix), vocab_size=30, hard_vocab_limit=False,
        character_coverage=1.0, minloglevel=2, num_threads=1,
    )
    assert Tokenizer.load(prefix.with_suffix(".model")).fingerprint() != tokenizer.fingerprint()
