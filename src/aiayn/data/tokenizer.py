"""Subword, character and byte-level tokenizers with an exact round trip.

:class:`Tokenizer` wraps a Hugging Face ``tokenizers.Tokenizer``. Three builders exist:

* :meth:`Tokenizer.train_bpe`: BPE over Metaspace pre-tokens (SentencePiece style: a space
  becomes ``"▁"`` and starts a new piece) with ``byte_fallback``: the 256 tokens
  ``<0x00>`` .. ``<0xFF>`` are always in the vocabulary, so a character never seen in training
  is encoded as its UTF-8 bytes instead of ``<unk>``. ``decode(encode(s)) == s`` for any text
  that does not itself contain ``"▁"`` (U+2581), including leading, trailing and repeated
  spaces, tabs and newlines.
* :meth:`Tokenizer.train_char`: one token per character seen in training; an unseen character
  becomes ``<unk>`` (and so disappears on decoding).
* :meth:`Tokenizer.train_byte_level_bpe`: GPT-2 style byte-level BPE; exact round trip on any
  text.

A trained vocabulary starts with ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>`` (ids 0..3). These are
plain vocabulary entries, not Hugging Face "added tokens": the text ``"<eos>"`` in user input is
encoded like any other text and never becomes the eos id. A Hugging Face ``tokenizer.json`` made
elsewhere (GPT-2's, say) loads too (:meth:`Tokenizer.load`, :mod:`aiayn.data.tokenizer_spec`);
its special ids are found by the rules of :mod:`aiayn.data.special_tokens`, and its special
tokens, like ours, are never read from text either. Every tokenizer carries its ids as
:attr:`Tokenizer.specials`. :meth:`Tokenizer.encode` adds no bos/eos; :meth:`Tokenizer.decode`
drops exactly the special ids and nothing else.
"""

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tokenizers
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

from aiayn.data.special_tokens import (
    SPECIAL_TOKENS,
    TRAINED_SPECIALS,
    UNK_ID,
    SpecialTokens,
    resolve_special_tokens,
)
from aiayn.errors import ConfigError, DataError
from aiayn.files import atomic_write_text

METASPACE = "\u2581"  # "▁", the SentencePiece word-boundary marker
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]
NUM_SPECIAL = len(SPECIAL_TOKENS)

TokenizerKind = Literal["bpe", "char", "byte_bpe"]
TOKENIZER_KINDS: tuple[str, ...] = ("bpe", "char", "byte_bpe")


class Tokenizer:
    """Text <-> token ids, with the special ids of its vocabulary.

    Args:
        hf: the Hugging Face tokenizer.
        specials: its special ids; None = the trained layout, ``<pad> <bos> <eos> <unk>`` at
            0..3 (a :class:`DataError` if ``hf`` does not start with them).
        path: the file it was read from, named in error messages.
    """

    def __init__(
        self, hf: tokenizers.Tokenizer, specials: SpecialTokens | None = None, path: str | Path | None = None
    ) -> None:
        self.path = Path(path) if path is not None else None
        if specials is None:
            for i, token in enumerate(SPECIAL_TOKENS):
                if hf.id_to_token(i) != token:
                    raise DataError(
                        f"tokenizer vocabulary must start with {SPECIAL_TOKENS}, "
                        f"but id {i} is {hf.id_to_token(i)!r}"
                    )
            specials = TRAINED_SPECIALS
        self.hf = _prepared(hf)
        self.specials = specials
        self.vocab_size = max(hf.get_vocab(with_added_tokens=True).values(), default=-1) + 1
        """Number of token ids (the largest id plus one)."""
        for name, token_id in specials.as_dict().items():
            if token_id is not None and not 0 <= token_id < self.vocab_size:
                raise DataError(
                    f"{self.origin}: special token {name} = {token_id} is not an id of its "
                    f"{self.vocab_size} tokens"
                )

    @property
    def origin(self) -> str:
        """The file the tokenizer came from, or 'tokenizer'."""
        return str(self.path) if self.path is not None else "tokenizer"

    def __getstate__(self) -> dict:
        return {"hf": self.hf.to_str(), "specials": self.specials, "path": self.path}

    def __setstate__(self, state: dict) -> None:
        # Through the JSON, as Hugging Face pickles, and __init__ sets the runtime switches again.
        self.__init__(tokenizers.Tokenizer.from_str(state["hf"]), state["specials"], state["path"])

    def check_fits(self, num_embeddings: int, what: str = "the model's embedding") -> None:
        """Raise :class:`DataError`, naming the file and the first token without a row, when
        the vocabulary has more tokens than ``num_embeddings``."""
        if self.vocab_size > num_embeddings:
            raise DataError(
                f"{self.origin}: token {self.hf.id_to_token(num_embeddings)!r} (id {num_embeddings}) "
                f"has no row in {what} of {num_embeddings} tokens; this tokenizer has {self.vocab_size}"
            )

    # ----------------------------------------------------------------- builders
    @classmethod
    def train_bpe(
        cls, texts: Iterable[str], vocab_size: int, min_frequency: int = 2
    ) -> "Tokenizer":
        """Train a Metaspace BPE tokenizer with byte fallback on ``texts``.

        ``vocab_size`` counts everything: 4 special tokens, 256 byte tokens, the characters seen
        and the merges learnt (fewer if the corpus is too small to learn that many).
        """
        extra = NUM_SPECIAL + len(BYTE_TOKENS)
        if vocab_size <= extra:
            raise ConfigError(
                f"BPE vocab_size must be > {extra} (specials + bytes), got {vocab_size}"
            )
        hf = tokenizers.Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS[UNK_ID]))
        hf.normalizer = normalizers.Prepend(METASPACE)
        hf.pre_tokenizer = pre_tokenizers.Metaspace(
            replacement=METASPACE, prepend_scheme="never", split=True
        )
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
        return cls(hf)

    @classmethod
    def train_char(cls, texts: Iterable[str]) -> "Tokenizer":
        """Build a character-level tokenizer: one token per distinct character in ``texts``."""
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
        return cls(hf)

    @classmethod
    def train_byte_level_bpe(
        cls, texts: Iterable[str], vocab_size: int, min_frequency: int = 2
    ) -> "Tokenizer":
        """Train a GPT-2 style byte-level BPE tokenizer (exact round trip on any text)."""
        alphabet = pre_tokenizers.ByteLevel.alphabet()
        if vocab_size <= NUM_SPECIAL + len(alphabet):
            raise ConfigError(
                f"byte-level BPE vocab_size must be > {NUM_SPECIAL + len(alphabet)}, "
                f"got {vocab_size}"
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
        return cls(hf)

    # ----------------------------------------------------------------- use
    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, without ``<bos>``/``<eos>``."""
        return self.hf.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text (parallel, through the Hugging Face batch encoder)."""
        encode = getattr(
            self.hf, "encode_batch_fast", self.hf.encode_batch
        )  # fast: tokenizers>=0.21
        encodings = encode(list(texts), add_special_tokens=False)
        return [e.ids for e in encodings]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``; the special ids (pad, bos, eos, unk) are skipped and nothing else."""
        return self.decode_batch([ids])[0]

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        """:meth:`decode` of each id sequence."""
        special = self.specials.ids
        kept = [[int(i) for i in ids if int(i) not in special] for ids in batch]
        return self.hf.decode_batch(kept, skip_special_tokens=False)

    def id_to_token(self, i: int) -> str:
        """The token string of id ``i``; :class:`IndexError` if ``i`` is not in the vocabulary."""
        token = self.hf.id_to_token(i) if i >= 0 else None
        if token is None:
            raise IndexError(f"token id {i} out of range [0, {self.vocab_size})")
        return token

    def tokens(self, text: str) -> list[str]:
        """Subword strings of ``text`` (as stored in the vocabulary, e.g. ``"▁the"``)."""
        return self.hf.encode(text, add_special_tokens=False).tokens

    # ----------------------------------------------------------------- files
    def save(self, path: str | Path) -> None:
        """Write the tokenizer to the JSON file ``path`` atomically (parent directories are
        created), so a process killed mid-save never leaves a truncated file."""
        atomic_write_text(path, self.hf.to_str(pretty=False))

    @classmethod
    def load(
        cls,
        path: str | Path,
        specials: SpecialTokens | None = None,
        names: dict[str, str | None] | None = None,
    ) -> "Tokenizer":
        """Read a Hugging Face ``tokenizer.json`` (one saved by :meth:`save`, or made elsewhere).

        Args:
            path: the file; missing or not a tokenizer -> :class:`DataError` naming it.
            specials: its special ids, as a model directory's ``config.json`` stores them.
            names: without ``specials``, the ``data.special_tokens`` mapping; the ids are then
                found by the rules of :mod:`aiayn.data.special_tokens` (which may append a
                padding token).
        """
        path = Path(path)
        if not path.is_file():
            raise DataError(f"tokenizer file not found: {path}")
        try:
            hf = tokenizers.Tokenizer.from_str(path.read_text(encoding="utf-8"))
        except Exception as err:  # OSError, UnicodeDecodeError, or tokenizers' plain Exception
            message = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise DataError(f"{path}: not a valid tokenizer file ({message})") from None
        return cls.from_hf(hf, str(path), specials, names, path)

    @classmethod
    def from_hf(
        cls,
        hf: tokenizers.Tokenizer,
        origin: str,
        specials: SpecialTokens | None = None,
        names: dict[str, str | None] | None = None,
        path: str | Path | None = None,
    ) -> "Tokenizer":
        """Wrap a Hugging Face tokenizer made elsewhere; ``origin`` names it in errors. The
        special ids are ``specials``, or found from ``names`` and the vocabulary."""
        if specials is None:
            specials = resolve_special_tokens(hf, names, origin)
        return cls(hf, specials, path)

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size}, model={type(self.hf.model).__name__})"


def _without_added_tokens(hf: tokenizers.Tokenizer) -> dict:
    """The JSON spec of ``hf`` with its "added tokens" removed (they stay in the vocabulary)."""
    spec = json.loads(hf.to_str())
    spec["added_tokens"] = []
    return spec


def _prepared(hf: tokenizers.Tokenizer) -> tokenizers.Tokenizer:
    """``hf`` set up for aiayn: special tokens are never read from text (only the code puts
    bos/eos/pad in place), and no truncation or padding behind the code's back."""
    hf.encode_special_tokens = True
    hf.no_truncation()
    hf.no_padding()
    return hf


JOINT_FILE = "tokenizer.json"
SOURCE_FILE = "src_tokenizer.json"
TARGET_FILE = "tgt_tokenizer.json"


@dataclass
class TokenizerPair:
    """The source and target tokenizers; the same object when the vocabulary is joint."""

    source: Tokenizer
    target: Tokenizer

    def __post_init__(self) -> None:
        if self.source.specials != self.target.specials:
            raise DataError(
                f"the source and target tokenizers have different special ids ({self.source.specials} "
                f"vs {self.target.specials}); a model has one set"
            )

    @property
    def specials(self) -> SpecialTokens:
        """The special ids, the same on both sides."""
        return self.source.specials

    @property
    def is_joint(self) -> bool:
        """True when source and target share one tokenizer (one vocabulary)."""
        return self.source is self.target

    def save(self, directory: str | Path) -> None:
        """Write ``tokenizer.json`` (joint) or ``src_tokenizer.json`` + ``tgt_tokenizer.json``.

        Files of the other layout left in ``directory`` by an earlier save are removed, so
        :meth:`load` is never ambiguous.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if self.is_joint:
            self.source.save(directory / JOINT_FILE)
            stale = [SOURCE_FILE, TARGET_FILE]
        else:
            self.source.save(directory / SOURCE_FILE)
            self.target.save(directory / TARGET_FILE)
            stale = [JOINT_FILE]
        for name in stale:
            (directory / name).unlink(missing_ok=True)

    @classmethod
    def load(
        cls,
        directory: str | Path,
        specials: SpecialTokens | None = None,
        names: dict[str, str | None] | None = None,
    ) -> "TokenizerPair":
        """Read the tokenizers saved by :meth:`save` from ``directory``, with the special ids
        ``specials`` (a model directory's) or, without them, found as :meth:`Tokenizer.load` does."""
        directory = Path(directory)
        joint = directory / JOINT_FILE
        src, tgt = directory / SOURCE_FILE, directory / TARGET_FILE
        has_joint, has_pair = joint.is_file(), src.is_file() or tgt.is_file()
        if has_joint and has_pair:
            raise DataError(
                f"{directory} holds both {JOINT_FILE} and {SOURCE_FILE}/{TARGET_FILE}; "
                "remove one layout"
            )
        if has_joint:
            tok = Tokenizer.load(joint, specials, names)
            return cls(tok, tok)
        if has_pair:
            return cls(Tokenizer.load(src, specials, names), Tokenizer.load(tgt, specials, names))
        raise DataError(
            f"no tokenizer in {directory}: expected {JOINT_FILE} or {SOURCE_FILE} + {TARGET_FILE}"
        )


def train_tokenizer(kind: str, texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """Train one tokenizer of ``kind`` ('bpe', 'char' or 'byte_bpe'; 'char' ignores the size)."""
    if kind == "bpe":
        return Tokenizer.train_bpe(texts, vocab_size)
    if kind == "char":
        return Tokenizer.train_char(texts)
    if kind == "byte_bpe":
        return Tokenizer.train_byte_level_bpe(texts, vocab_size)
    raise ConfigError(
        f"unknown tokenizer kind {kind!r}; choose one of {', '.join(TOKENIZER_KINDS)}"
    )


def build_tokenizers(
    kind: str,
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    vocab_size: int,
    joint: bool = True,
) -> TokenizerPair:
    """Train the tokenizers of a translation task.

    With ``joint=True`` (the default, like the paper's shared source-target BPE vocabulary) one
    tokenizer is trained on both sides and used for both; otherwise each side gets its own
    tokenizer of ``vocab_size``.
    """
    if joint:
        tok = train_tokenizer(kind, [*src_texts, *tgt_texts], vocab_size)
        return TokenizerPair(tok, tok)
    return TokenizerPair(
        train_tokenizer(kind, src_texts, vocab_size), train_tokenizer(kind, tgt_texts, vocab_size)
    )
