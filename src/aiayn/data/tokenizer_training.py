"""The kinds of tokenizer aiayn trains itself: `bpe`, `char` and `byte_bpe`.

`train_hf(kind, texts, vocab_size)` returns the Hugging Face tokenizer; `Tokenizer.train`
(`aiayn.data.tokenizer`) wraps it. Each vocabulary starts with `<pad> <bos> <eos> <unk>`
(ids 0..3) as plain vocabulary entries, not Hugging Face "added tokens", so that the text
`"<eos>"` is encoded like any other text.

* `bpe`: BPE over Metaspace pre-tokens (SentencePiece style: a space becomes `"▁"` and starts
  a new piece) with `byte_fallback`: the 256 tokens `<0x00>` .. `<0xFF>` are always in the
  vocabulary, so a character never seen in training is encoded as its UTF-8 bytes instead of
  `<unk>`. `decode(encode(s)) == s` for any text that does not itself contain `"▁"` (U+2581),
  including leading, trailing and repeated spaces, tabs and newlines.
* `char`: one token per character seen in training; an unseen character becomes `<unk>` (and
  so disappears on decoding).
* `byte_bpe`: GPT-2 style byte-level BPE; exact round trip on any text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import tokenizers
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

from aiayn.core.errors import ConfigError
from aiayn.data.special_tokens import SPECIAL_TOKENS, UNK_ID

METASPACE = "\u2581"  # "▁", the SentencePiece word-boundary marker
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]
NUM_SPECIAL = len(SPECIAL_TOKENS)
TOKENIZER_KINDS: tuple[str, ...] = ("bpe", "char", "byte_bpe")


def train_hf(
    kind: str, texts: Iterable[str], vocab_size: int, min_frequency: int = 2
) -> tokenizers.Tokenizer:
    """Train a tokenizer of `kind` ('bpe', 'char' or 'byte_bpe'; 'char' ignores the size) on
    `texts`; `ConfigError` for another kind or a `vocab_size` too small for the kind."""
    if kind == "bpe":
        return _train_bpe(texts, vocab_size, min_frequency)
    if kind == "char":
        return _train_char(texts)
    if kind == "byte_bpe":
        return _train_byte_level_bpe(texts, vocab_size, min_frequency)
    raise ConfigError(f"unknown tokenizer kind {kind!r}; choose one of {', '.join(TOKENIZER_KINDS)}")


def _train_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int) -> tokenizers.Tokenizer:
    """Metaspace BPE with byte fallback. `vocab_size` counts everything: 4 special tokens, 256
    byte tokens, the characters seen and the merges learnt (fewer if the corpus is too small
    to learn that many)."""
    extra = NUM_SPECIAL + len(BYTE_TOKENS)
    if vocab_size <= extra:
        raise ConfigError(f"BPE vocab_size must be > {extra} (specials + bytes), got {vocab_size}")
    hf = tokenizers.Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS[UNK_ID]))
    hf.normalizer = normalizers.Prepend(METASPACE)
    hf.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="never", split=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(BYTE_TOKENS),
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        show_progress=False,
    )
    hf.train_from_iterator(texts, trainer=trainer)
    spec = _without_added_tokens(hf)
    learnt = [t for t, _ in sorted(spec["model"]["vocab"].items(), key=lambda kv: kv[1])]
    reserved = SPECIAL_TOKENS + BYTE_TOKENS
    taken = set(reserved)
    ordered = reserved + [t for t in learnt[NUM_SPECIAL:] if t not in taken]
    spec["model"]["vocab"] = {t: i for i, t in enumerate(ordered)}
    spec["model"]["byte_fallback"] = True
    hf = tokenizers.Tokenizer.from_str(json.dumps(spec))
    # The decoder turns byte tokens back into text, then "▁" into spaces, dropping the one
    # "▁" that the Prepend normalizer put in front of the text.
    hf.decoder = decoders.Sequence(
        [
            decoders.ByteFallback(),
            decoders.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True),
        ]
    )
    return hf


def _train_char(texts: Iterable[str]) -> tokenizers.Tokenizer:
    """One token per distinct character in `texts`."""
    chars: set[str] = set()
    for text in texts:
        chars.update(text)
    vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS)}
    for ch in sorted(chars):
        vocab.setdefault(ch, len(vocab))
    # A BPE model without merges splits its input into characters and maps unknown ones to
    # <unk>; without a pre-tokenizer the whole text is one "word", spaces included.
    hf = tokenizers.Tokenizer(
        models.BPE(vocab=vocab, merges=[], unk_token=SPECIAL_TOKENS[UNK_ID], fuse_unk=False)
    )
    hf.decoder = decoders.Fuse()
    return hf


def _train_byte_level_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int) -> tokenizers.Tokenizer:
    """GPT-2 style byte-level BPE (exact round trip on any text)."""
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size <= NUM_SPECIAL + len(alphabet):
        raise ConfigError(
            f"byte-level BPE vocab_size must be > {NUM_SPECIAL + len(alphabet)}, got {vocab_size}"
        )
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=alphabet,
        show_progress=False,
    )
    hf.train_from_iterator(texts, trainer=trainer)
    hf = tokenizers.Tokenizer.from_str(json.dumps(_without_added_tokens(hf)))
    hf.decoder = decoders.ByteLevel()
    return hf


def _without_added_tokens(hf: tokenizers.Tokenizer) -> dict:
    """The JSON spec of `hf` with its "added tokens" removed (they stay in the vocabulary)."""
    spec = json.loads(hf.to_str())
    spec["added_tokens"] = []
    return spec
