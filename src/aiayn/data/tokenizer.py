"""Text <-> token ids: one `Tokenizer` (a vocabulary), and the `TokenizerPair` of a translation
model (source and target; one object twice when the vocabulary is joint).

One way to make, load and save them:

    Tokenizer.train(kind, texts, vocab_size)            # 'bpe', 'char' or 'byte_bpe'
    Tokenizer.load(source, specials=None, names=None)   # a tokenizer.json, a directory holding
                                                        # one, or a Hugging Face Hub name
    Tokenizer.from_spec(spec, texts, vocab_size, names) # what `data.tokenizer` names: trained
                                                        # (a kind) or loaded (anything else)
    tokenizer.save(path)                                # a tokenizer.json, written atomically

    TokenizerPair.from_spec(spec, src_texts, tgt_texts, vocab_size, joint=True, names=None)
    TokenizerPair.load(directory, specials=None, names=None)
    pair.save(directory)          # tokenizer.json (joint) or src_ + tgt_tokenizer.json

The kinds aiayn trains are described in `aiayn.data.tokenizer_training`, the values of
`data.tokenizer` in `aiayn.data.tokenizer_spec`. A trained vocabulary starts with `<pad>`,
`<bos>`, `<eos>`, `<unk>` (ids 0..3); a Hugging Face `tokenizer.json` made elsewhere (GPT-2's,
say) has its own special ids: `specials` gives them (as a model directory's `config.json`
stores them), or else they are found by the rules of `aiayn.data.special_tokens`, with the
`data.special_tokens` mapping `names`. Special tokens are never read from text: the text
`"<eos>"` in user input is encoded like any other text and never becomes the eos id. Every
tokenizer carries its ids as `Tokenizer.specials`; `Tokenizer.encode` adds no bos/eos and
`Tokenizer.decode` drops exactly the special ids and nothing else.

A trained tokenizer learns from the training texts alone. For translation, `joint=True` (the
default, like the paper's shared source-target BPE vocabulary) trains one tokenizer on both
sides; otherwise each side gets its own of `vocab_size`. A loaded tokenizer serves both sides
as one joint vocabulary.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tokenizers

from aiayn.core.errors import ConfigError, DataError
from aiayn.core.files import atomic_write_text
from aiayn.data import sentencepiece_tokenizer as spm
from aiayn.data.special_tokens import SpecialTokens, check_special_token_names, resolve_special_tokens
from aiayn.data.tokenizer_spec import JOINT_FILE, SOURCE_FILE, TARGET_FILE, is_trained_kind, read_hf_tokenizer
from aiayn.data.tokenizer_training import train_hf

log = logging.getLogger(__name__)

Names = Mapping[str, str | None] | None
"""The `data.special_tokens` mapping (role -> token), for a loaded tokenizer."""

__all__ = [
    "FORMATS", "JOINT_FILE", "SOURCE_FILE", "TARGET_FILE", "Tokenizer", "TokenizerFormat", "TokenizerPair",
]


@dataclass(frozen=True)
class TokenizerFormat:
    """A tokenizer file format besides Hugging Face's `tokenizer.json` (the default), as the
    loader (`Tokenizer.load`, `TokenizerPair.from_spec` / `load` / `save`) knows it."""

    name: str
    owns_file: Callable[[str | Path], bool]
    """Whether a file (by its name) is of this format."""
    load: Callable[[str | Path, SpecialTokens | None], Any]
    """One tokenizer from a file of this format, with the given special ids (or its own)."""
    joint_file: str
    """The name a model directory keeps a joint tokenizer of this format under."""
    has_pair: Callable[[str | Path], bool]
    """Whether a directory holds a source/target pair of this format."""
    load_pair: Callable[[str | Path, SpecialTokens | None], tuple[Any, Any]]
    save_pair: Callable[[Any, Path], None]
    tokenizer_class: type
    """The class of the tokenizers this format loads (how `save` recognises them)."""


FORMATS: tuple[TokenizerFormat, ...] = (
    TokenizerFormat(
        "sentencepiece", spm.is_sentencepiece_file, spm.load_sentencepiece, "tokenizer.model",
        spm.has_marian_pair, spm.load_marian_tokenizers, spm.save_marian_pair, spm.SentencePieceTokenizer,
    ),
)
"""The formats the loader knows besides `tokenizer.json`, tried in order."""


class Tokenizer:
    """Text <-> token ids, with the special ids of its vocabulary.

    Made by `train`, `load` or `from_spec` (see the module docstring), or from a Hugging Face
    tokenizer at hand:

    Args:
        hf: the Hugging Face tokenizer.
        specials: its special ids; None = found by the rules of `aiayn.data.special_tokens`
            (a tokenizer aiayn trained keeps `<pad> <bos> <eos> <unk>` at 0..3).
        path: the file it was read from.
        names: without `specials`, the `data.special_tokens` mapping.
        origin: what names it in error messages (default: `path`, or 'tokenizer').
    """

    def __init__(
        self,
        hf: tokenizers.Tokenizer,
        specials: SpecialTokens | None = None,
        path: str | Path | None = None,
        *,
        names: Names = None,
        origin: str | None = None,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.origin = origin or (str(self.path) if self.path is not None else "tokenizer")
        """The file or Hub name the tokenizer came from, or 'tokenizer'."""
        if specials is None:
            specials = resolve_special_tokens(hf, names, self.origin)
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

    def __getstate__(self) -> dict:
        return {"hf": self.hf.to_str(), "specials": self.specials, "path": self.path, "origin": self.origin}

    def __setstate__(self, state: dict) -> None:
        # Through the JSON, as Hugging Face pickles, and __init__ sets the runtime switches again.
        hf = tokenizers.Tokenizer.from_str(state["hf"])
        self.__init__(hf, state["specials"], state["path"], origin=state["origin"])

    def check_fits(self, num_embeddings: int, what: str = "the model's embedding") -> None:
        """Raise `DataError`, naming the file and the first token without a row, when the
        vocabulary has more tokens than `num_embeddings`."""
        if self.vocab_size > num_embeddings:
            raise DataError(
                f"{self.origin}: token {self.hf.id_to_token(num_embeddings)!r} (id {num_embeddings}) "
                f"has no row in {what} of {num_embeddings} tokens; this tokenizer has {self.vocab_size}"
            )

    # ----------------------------------------------------------------- make, load, save
    @classmethod
    def train(cls, kind: str, texts: Iterable[str], vocab_size: int = 0, min_frequency: int = 2) -> Tokenizer:
        """Train a tokenizer of `kind` ('bpe', 'char' or 'byte_bpe', see
        `aiayn.data.tokenizer_training`) on `texts`; `vocab_size` counts every token ('char'
        ignores it). `ConfigError` for another kind or too small a size."""
        return cls(train_hf(kind, texts, vocab_size, min_frequency))

    @classmethod
    def load(
        cls, source: str | Path, specials: SpecialTokens | None = None, names: Names = None
    ) -> Tokenizer:
        """Read a Hugging Face `tokenizer.json` (one saved by `save`, or made elsewhere).

        Args:
            source: the file, a directory holding `tokenizer.json`, or (a `str`) a Hub name;
                missing or not a tokenizer -> `DataError` naming it. A SentencePiece model
                (`.model`, or a Marian `.spm` beside its `vocab.json`) is read by
                `aiayn.data.sentencepiece_tokenizer`; so is the `tokenizer.model` that a model
                directory keeps in place of a `tokenizer.json`.
            specials: its special ids, as a model directory's `config.json` stores them.
            names: without `specials`, the `data.special_tokens` mapping; the ids are then
                found by the rules of `aiayn.data.special_tokens` (which may append a padding
                token).
        """
        for form in FORMATS:
            suffix = Path(form.joint_file).suffix  # `tokenizer.model` kept in place of a `tokenizer.json`
            sibling = Path(source).with_suffix(suffix) if str(source).endswith(JOINT_FILE) else None
            if form.owns_file(source) or (sibling is not None and sibling.is_file()):
                return form.load(sibling if sibling is not None else source, specials)
        hf, path = read_hf_tokenizer(source)
        origin = str(path) if path is not None else f"Hugging Face Hub tokenizer {str(source)!r}"
        return cls(hf, specials, path, names=names, origin=origin)

    @classmethod
    def from_spec(
        cls, spec: str, texts: Sequence[str] = (), vocab_size: int = 0, names: Names = None
    ) -> Tokenizer:
        """The tokenizer `data.tokenizer` names (`aiayn.data.tokenizer_spec`): a kind trained on
        `texts` (`vocab_size` tokens), or a file, directory or Hub name loaded (`texts` and
        `vocab_size` then play no part) with its ids found from `names`."""
        if is_trained_kind(spec):
            if names:
                raise ConfigError(
                    f"data.special_tokens applies to a loaded tokenizer; a trained {spec!r} tokenizer "
                    "always has <pad> <bos> <eos> <unk> at ids 0..3"
                )
            return cls.train(spec, texts, vocab_size)
        tokenizer = cls.load(spec, names=check_special_token_names(names))
        specials = tokenizer.specials
        log.info(
            "loaded tokenizer %s: %d tokens; pad %d, bos %d, eos %d, unk %s",
            spec, tokenizer.vocab_size, specials.pad_id, specials.bos_id, specials.eos_id, specials.unk_id,
        )
        return tokenizer

    def fingerprint(self) -> str:
        """sha256 of everything that decides the ids (the tokenizer's JSON), for cache keys
        such as the token store's."""
        return hashlib.sha256(self.hf.to_str().encode()).hexdigest()

    def save(self, path: str | Path) -> None:
        """Write the tokenizer to the JSON file `path` atomically (parent directories are
        created), so a process killed mid-save never leaves a truncated file."""
        atomic_write_text(path, self.hf.to_str(pretty=False))

    # ----------------------------------------------------------------- use
    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, without `<bos>`/`<eos>`."""
        return self.hf.encode(text, add_special_tokens=False).ids

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """`encode(text)` and each token's (start, end) character span in `text` itself, as
        `tokenizers` maps it back through normalisation ((0, 0): a token of no character)."""
        encoding = self.hf.encode(text, add_special_tokens=False)
        return encoding.ids, [(int(start), int(end)) for start, end in encoding.offsets]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text (parallel, through the Hugging Face batch encoder)."""
        encode = getattr(
            self.hf, "encode_batch_fast", self.hf.encode_batch
        )  # fast: tokenizers>=0.21
        encodings = encode(list(texts), add_special_tokens=False)
        return [e.ids for e in encodings]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`; the special ids (pad, bos, eos, unk) are skipped and nothing else."""
        return self.decode_batch([ids])[0]

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        """`decode` of each id sequence."""
        special = self.specials.ids
        kept = [[int(i) for i in ids if int(i) not in special] for ids in batch]
        return self.hf.decode_batch(kept, skip_special_tokens=False)

    def id_to_token(self, i: int) -> str:
        """The token string of id `i`; `IndexError` if `i` is not in the vocabulary."""
        token = self.hf.id_to_token(i) if i >= 0 else None
        if token is None:
            raise IndexError(f"token id {i} out of range [0, {self.vocab_size})")
        return token

    def tokens(self, text: str) -> list[str]:
        """Subword strings of `text` (as stored in the vocabulary, e.g. `"▁the"`)."""
        return self.hf.encode(text, add_special_tokens=False).tokens

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size}, model={type(self.hf.model).__name__})"


def _prepared(hf: tokenizers.Tokenizer) -> tokenizers.Tokenizer:
    """`hf` set up for aiayn: special tokens are never read from text (only the code puts
    bos/eos/pad in place), and no truncation or padding behind the code's back."""
    hf.encode_special_tokens = True
    hf.no_truncation()
    hf.no_padding()
    return hf


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

    @classmethod
    def from_spec(
        cls,
        spec: str,
        src_texts: Sequence[str],
        tgt_texts: Sequence[str],
        vocab_size: int,
        joint: bool = True,
        names: Names = None,
    ) -> TokenizerPair:
        """The tokenizers of a translation model, as `data.tokenizer` names them
        (`Tokenizer.from_spec`): trained on both sides' texts (`joint`) or one per side, or
        one loaded tokenizer for both sides (one joint vocabulary, whatever `joint` says)."""
        trained = is_trained_kind(spec)
        for form in () if trained else FORMATS:  # e.g. OPUS-MT's source.spm + target.spm + vocab.json
            if form.has_pair(spec):
                return cls(*form.load_pair(spec, None))
        if not (trained or joint):
            log.warning(
                "data.joint_vocab: false ignored: a loaded tokenizer serves both sides as one vocabulary"
            )
        if joint or not trained:
            both = Tokenizer.from_spec(spec, [*src_texts, *tgt_texts] if trained else [], vocab_size, names)
            return cls(both, both)
        return cls(
            Tokenizer.from_spec(spec, src_texts, vocab_size, names),
            Tokenizer.from_spec(spec, tgt_texts, vocab_size, names),
        )

    @classmethod
    def load(
        cls, directory: str | Path, specials: SpecialTokens | None = None, names: Names = None
    ) -> TokenizerPair:
        """Read the tokenizers saved by `save` from `directory`, with the special ids `specials`
        (a model directory's) or, without them, found as `Tokenizer.load` does."""
        directory = Path(directory)
        for form in FORMATS:
            if form.has_pair(directory):
                return cls(*form.load_pair(directory, specials))
        joint = directory / JOINT_FILE
        for form in FORMATS:
            if (directory / form.joint_file).is_file():
                joint = directory / form.joint_file
        src, tgt = directory / SOURCE_FILE, directory / TARGET_FILE
        has_joint, has_pair = joint.is_file(), src.is_file() or tgt.is_file()
        if has_joint and has_pair:
            raise DataError(
                f"{directory} holds both {JOINT_FILE} and {SOURCE_FILE}/{TARGET_FILE}; remove one layout"
            )
        if has_joint:
            tokenizer = Tokenizer.load(joint, specials, names)
            return cls(tokenizer, tokenizer)
        if has_pair:
            return cls(Tokenizer.load(src, specials, names), Tokenizer.load(tgt, specials, names))
        raise DataError(
            f"no tokenizer in {directory}: expected {JOINT_FILE} or {SOURCE_FILE} + {TARGET_FILE}"
        )

    def save(self, directory: str | Path) -> None:
        """Write `tokenizer.json` (joint) or `src_tokenizer.json` + `tgt_tokenizer.json`.

        Files of the other layout left in `directory` by an earlier save are removed, so
        `load` is never ambiguous.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for form in FORMATS:
            if isinstance(self.source, form.tokenizer_class):
                if self.is_joint:
                    self.source.save(directory / form.joint_file)
                else:
                    form.save_pair(self, directory)
                return
        if self.is_joint:
            self.source.save(directory / JOINT_FILE)
            stale = [SOURCE_FILE, TARGET_FILE]
        else:
            self.source.save(directory / SOURCE_FILE)
            self.target.save(directory / TARGET_FILE)
            stale = [JOINT_FILE]
        for name in stale:
            (directory / name).unlink(missing_ok=True)
