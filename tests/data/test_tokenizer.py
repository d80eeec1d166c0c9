"""Tokenizers: exact round trips, special ids, files."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiayn.core.errors import ConfigError, DataError
from aiayn.data import Tokenizer, TokenizerPair
from aiayn.data.special_tokens import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID

SRC = [
    "Zwei junge Männer spielen im Park Fußball.",
    "Eine Frau mit rotem Hut liest ein Buch, während es regnet!",
    "Der Hund (ein Golden Retriever) läuft über die Straße.",
    "Ein Mädchen isst 3 Äpfel und 12 Birnen; Café au lait?",
    "Zwei   Kinder  sitzen auf  einer Bank.",
]
TGT = [
    "Two young men are playing soccer in the park.",
    "A woman with a red hat reads a book while it rains!",
    "The dog (a golden retriever) runs across the street.",
    "A girl eats 3 apples and 12 pears; café au lait?",
    "Two   children  sit on  a bench.",
]
CORPUS = (SRC + TGT) * 20

SAMPLES = [
    "Hello, world!",
    " leading and trailing spaces ",
    "many     spaces  between",
    "Ünïcödé ©, 日本語, emoji 🎉 and tabs\tand\nnewlines",
    "digits 2026-11-21 12.5% $3,000.00",
    "",
    " ",
    "<eos> <pad> look like special tokens",
]

# Any text Python can encode as UTF-8; for Metaspace BPE minus "▁" (its own space marker).
ANY_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)
BPE_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="▁"), max_size=60)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def bpe() -> Tokenizer:
    return Tokenizer.train("bpe", CORPUS, vocab_size=400)


@pytest.fixture(scope="module")
def char() -> Tokenizer:
    return Tokenizer.train("char", CORPUS)


@pytest.fixture(scope="module")
def byte_bpe() -> Tokenizer:
    return Tokenizer.train("byte_bpe", CORPUS, vocab_size=400)


@pytest.fixture(scope="module", params=["bpe", "char", "byte_bpe"])
def any_tok(request, bpe, char, byte_bpe) -> Tokenizer:
    return {"bpe": bpe, "char": char, "byte_bpe": byte_bpe}[request.param]


@pytest.mark.parametrize("text", SAMPLES)
def test_bpe_and_byte_level_round_trip_samples(bpe, byte_bpe, text):
    assert bpe.decode(bpe.encode(text)) == text
    assert byte_bpe.decode(byte_bpe.encode(text)) == text


@FAST
@given(text=BPE_TEXT)
def test_bpe_round_trip_any_text(bpe, text):
    assert bpe.decode(bpe.encode(text)) == text


@FAST
@given(text=ANY_TEXT)
def test_byte_level_round_trip_any_text(byte_bpe, text):
    assert byte_bpe.decode(byte_bpe.encode(text)) == text


@FAST
@given(text=st.text(st.sampled_from(sorted(set("".join(CORPUS)))), max_size=80))
def test_char_round_trip_on_seen_characters(char, text):
    ids = char.encode(text)
    assert len(ids) == len(text)
    assert char.decode(ids) == text


def test_bpe_learns_subwords_and_never_needs_unk(bpe):
    assert bpe.vocab_size == 400
    assert bpe.tokens("Two young men")[0] == "▁Two"  # a frequent word is one token
    assert len(bpe.encode("Two young men are playing")) < len("Two young men are playing") - 5
    ids = bpe.encode("Ωmega 日本 never seen")
    assert UNK_ID not in ids
    assert any(bpe.id_to_token(i).startswith("<0x") for i in ids)  # byte fallback


def test_char_unseen_character_is_unk(char):
    assert char.encode("a日b") == [char.encode("a")[0], UNK_ID, char.encode("b")[0]]
    assert char.decode(char.encode("a日b")) == "ab"
    assert char.tokens("ab c") == ["a", "b", " ", "c"]


def test_special_ids_are_first_in_every_vocabulary(any_tok):
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert [any_tok.id_to_token(i) for i in range(4)] == SPECIAL_TOKENS
    with pytest.raises(IndexError):
        any_tok.id_to_token(any_tok.vocab_size)


def test_encode_adds_no_specials_and_decode_skips_them(any_tok):
    text = "A woman reads a book."
    ids = any_tok.encode(text)
    assert min(ids) >= 4
    assert any_tok.decode([BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]) == text
    assert any_tok.decode_batch([[BOS_ID, *ids], ids[:0]]) == [text, ""]


def test_special_token_text_is_not_a_special_id(bpe, byte_bpe):
    for tok in (bpe, byte_bpe):
        ids = tok.encode("<eos><pad><bos><unk>")
        assert all(i >= 4 for i in ids)
        assert tok.decode(ids) == "<eos><pad><bos><unk>"


def test_encode_batch_matches_encode(any_tok):
    texts = SRC + TGT + [""]
    assert any_tok.encode_batch(texts) == [any_tok.encode(t) for t in texts]


def test_tokens_are_subword_strings(bpe):
    pieces = bpe.tokens("Two young men")
    assert len(pieces) == len(bpe.encode("Two young men"))
    assert "".join(pieces).replace("▁", " ") == " Two young men"


def test_vocab_size_too_small_is_config_error():
    with pytest.raises(ConfigError):
        Tokenizer.train("bpe", CORPUS, vocab_size=100)
    with pytest.raises(ConfigError):
        Tokenizer.train("byte_bpe", CORPUS, vocab_size=200)


def test_save_load_round_trip(any_tok, tmp_path):
    path = tmp_path / "sub" / "tok.json"
    any_tok.save(path)
    loaded = Tokenizer.load(path)
    assert loaded.vocab_size == any_tok.vocab_size
    for text in SAMPLES:
        assert loaded.encode(text) == any_tok.encode(text)
        assert loaded.decode(loaded.encode(text)) == any_tok.decode(any_tok.encode(text))


def test_load_missing_or_corrupt_file_names_it(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(DataError, match=r"nope\.json"):
        Tokenizer.load(missing)
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"model": ', encoding="utf-8")
    with pytest.raises(DataError, match=r"corrupt\.json"):
        Tokenizer.load(corrupt)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(DataError, match=r"binary\.json"):
        Tokenizer.load(binary)


def test_load_rejects_wrong_special_tokens(tmp_path, char):
    path = tmp_path / "swapped.json"
    text = char.hf.to_str().replace('"<pad>"', '"<PAD>"')
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=r"swapped\.json"):
        Tokenizer.load(path)


def test_pair_joint_and_separate_files(tmp_path, bpe, char):
    joint = TokenizerPair(bpe, bpe)
    assert joint.is_joint
    joint.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer.json"]
    loaded = TokenizerPair.load(tmp_path)
    assert loaded.is_joint and loaded.source.encode("a dog") == bpe.encode("a dog")

    separate = TokenizerPair(char, bpe)
    assert not separate.is_joint
    separate.save(tmp_path)  # replaces the joint layout
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "src_tokenizer.json",
        "tgt_tokenizer.json",
    ]
    loaded = TokenizerPair.load(tmp_path)
    assert not loaded.is_joint
    assert loaded.source.encode("dog") == char.encode("dog")
    assert loaded.target.encode("dog") == bpe.encode("dog")


def test_pair_load_errors(tmp_path, bpe):
    with pytest.raises(DataError, match="no tokenizer"):
        TokenizerPair.load(tmp_path)
    TokenizerPair(bpe, bpe).save(tmp_path)
    bpe.save(tmp_path / "src_tokenizer.json")
    with pytest.raises(DataError, match="both"):
        TokenizerPair.load(tmp_path)


def test_pair_from_spec_joint_and_separate():
    src, tgt = ["xyz xyz"] * 3, ["abc abc"] * 3
    joint = TokenizerPair.from_spec("char", src, tgt, vocab_size=0)
    assert joint.is_joint and UNK_ID not in joint.source.encode("xa")
    separate = TokenizerPair.from_spec("char", src, tgt, vocab_size=0, joint=False)
    assert not separate.is_joint
    assert UNK_ID not in separate.source.encode("xyz") and separate.source.encode("a") == [UNK_ID]
    assert UNK_ID not in separate.target.encode("abc") and separate.target.encode("x") == [UNK_ID]
    bpe = TokenizerPair.from_spec("bpe", SRC * 10, TGT * 10, vocab_size=320)
    assert bpe.is_joint and bpe.source.decode(bpe.source.encode(SRC[0])) == SRC[0]
    with pytest.raises(ConfigError, match="bpe, char, byte_bpe"):
        Tokenizer.train("wordpiece", src, vocab_size=100)
