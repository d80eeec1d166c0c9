"""SentencePiece tokenizers: a `.model` file, or OPUS-MT's `source.spm` / `target.spm` + `vocab.json`.

    Tokenizer.load("spm.model")                       # data.tokenizer: a .model file
    TokenizerPair.load(directory, specials)           # OPUS-MT: one SentencePiece model per side

`aiayn.data.tokenizer` (the one loader, which knows every tokenizer format) reads these files
through this module; this module does not import it back.

A SentencePiece model splits text into pieces; the ids are either its own (a `.model` file
alone) or, as OPUS-MT (Marian) ships them, those of a separate `vocab.json` that both sides
share (a piece missing from it is `<unk>`, as `MarianTokenizer` maps it). Marian source text
may start with a target-language code such as `>>fr<<`, which is one token, not split.

The `sentencepiece` package comes with aiayn's optional extra `sentencepiece`.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from aiayn.core.errors import ConfigError, DataError
from aiayn.core.files import atomic_write_text
from aiayn.data.special_tokens import SpecialTokens

MARIAN_SOURCE = "source.spm"
MARIAN_TARGET = "target.spm"
MARIAN_VOCAB = "vocab.json"
EXTENSIONS = (".model", ".spm")
"""File endings `data.tokenizer` reads as a SentencePiece model."""


def is_sentencepiece_file(source: str | Path) -> bool:
    """Whether `source` names a SentencePiece model file (by its ending)."""
    return str(source).endswith(EXTENSIONS)


def has_marian_pair(directory: str | Path) -> bool:
    """Whether `directory` holds OPUS-MT's `source.spm`, `target.spm` and `vocab.json`."""
    directory = Path(directory)
    return all((directory / name).is_file() for name in (MARIAN_SOURCE, MARIAN_TARGET, MARIAN_VOCAB))


def _processor(path: Path) -> Any:
    try:
        sentencepiece = importlib.import_module("sentencepiece")
    except ImportError:
        raise ConfigError(
            f"{path}: SentencePiece tokenizers need the Python package 'sentencepiece', which comes "
            "with aiayn's optional extra 'sentencepiece': pip install 'aiayn[sentencepiece]'"
        ) from None
    if not path.is_file():
        raise DataError(f"tokenizer {path}: no such file")
    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.Load(str(path))
    except (OSError, RuntimeError) as error:
        raise DataError(f"tokenizer {path}: not a SentencePiece model ({error})") from None
    return processor


def read_vocab(path: Path) -> dict[str, int]:
    """A Marian `vocab.json` (piece -> id); `DataError` naming the file when it is not one."""
    try:
        vocab = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise DataError(f"{path}: not a readable vocabulary ({error})") from None
    if not isinstance(vocab, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in vocab.items()
    ):
        raise DataError(f"{path}: expected a JSON object mapping each token to a non-negative id")
    return vocab


class SentencePieceTokenizer:
    """A tokenizer with `aiayn.data.tokenizer.Tokenizer`'s methods that splits text with a
    SentencePiece model.

    Args:
        path: the SentencePiece model file.
        vocab: piece -> id (Marian's `vocab.json`), or None for the model's own ids.
        specials: the special ids; None: the model's own (`<unk>` and its pad/bos/eos ids;
            a model without a padding id gets `<pad>` appended after its last id).
        vocab_path: the file `vocab` came from (for error messages).
    """

    def __init__(
        self,
        path: str | Path,
        vocab: dict[str, int] | None = None,
        specials: SpecialTokens | None = None,
        vocab_path: str | Path | None = None,
    ) -> None:
        self.path = Path(path)
        self.origin = str(vocab_path or self.path)
        self.processor = _processor(self.path)
        self.hf = None  # no Hugging Face tokenizer behind it (export of its vocabulary: `vocab`)
        if vocab is None:
            vocab = {self.processor.IdToPiece(i): i for i in range(self.processor.GetPieceSize())}
            if self.processor.pad_id() < 0:  # SentencePiece trains without padding by default: append one
                vocab["<pad>"] = len(vocab)
            if specials is None:
                specials = self._own_specials(vocab)
        elif specials is None:
            specials = _marian_specials(vocab, self.origin)
        self.vocab = vocab
        self.pieces = {i: piece for piece, i in vocab.items()}
        self.vocab_size = max(vocab.values(), default=-1) + 1
        self.specials = specials
        for name, token_id in specials.as_dict().items():
            if token_id is not None and not 0 <= token_id < self.vocab_size:
                raise DataError(
                    f"{self.origin}: special token {name} = {token_id} is not an id of its "
                    f"{self.vocab_size} tokens"
                )

    def _own_specials(self, vocab: dict[str, int]) -> SpecialTokens:
        """The ids the SentencePiece model itself declares (-1: none)."""
        sp = self.processor
        pad = sp.pad_id() if sp.pad_id() >= 0 else vocab["<pad>"]
        bos, eos = sp.bos_id(), sp.eos_id()
        if bos < 0 or eos < 0:
            raise DataError(f"{self.path}: the SentencePiece model has no bos or eos id (train it with both)")
        unk = sp.unk_id()
        return SpecialTokens(pad, bos, eos, unk if unk >= 0 else None)

    def fingerprint(self) -> str:
        """sha256 of everything that decides the ids: the SentencePiece model, the vocabulary and
        the special ids (for cache keys such as the token store's)."""
        vocab = json.dumps(self.vocab, sort_keys=True, ensure_ascii=False).encode()
        model = self.processor.serialized_model_proto()
        return hashlib.sha256(model + b"\0" + vocab + repr(self.specials).encode()).hexdigest()

    def __getstate__(self) -> dict:
        return {"path": self.path, "vocab": self.vocab, "specials": self.specials, "origin": self.origin}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], state["vocab"], state["specials"], state["origin"])

    def check_fits(self, num_embeddings: int, what: str = "the model's embedding") -> None:
        if self.vocab_size > num_embeddings:
            raise DataError(
                f"{self.origin}: token {self.pieces.get(num_embeddings, '?')!r} (id {num_embeddings}) has "
                f"no row in {what} of {num_embeddings} tokens; this tokenizer has {self.vocab_size}"
            )

    def save(self, path: str | Path) -> None:
        """Copy the SentencePiece model to `path` (a `.model` file beside it keeps the ids)."""
        path = Path(path)
        if path.suffix == ".json":  # a model directory's tokenizer.json: keep the model as tokenizer.model
            path = path.with_suffix(".model")
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.resolve() != self.path.resolve():
            shutil.copyfile(self.path, path)

    # ----------------------------------------------------------------- use
    def tokens(self, text: str) -> list[str]:
        code = []
        if text.startswith(">>") and (end := text.find("<<")) != -1 and text[: end + 2] in self.vocab:
            code, text = [text[: end + 2]], text[end + 2 :]
        return code + self.processor.encode(text, out_type=str)

    def encode(self, text: str) -> list[int]:
        unk = self.specials.unk_id
        ids = []
        for piece in self.tokens(text):
            token_id = self.vocab.get(piece, unk)
            if token_id is None:
                raise DataError(
                    f"{self.origin}: piece {piece!r} is not in the vocabulary, which has no <unk>"
                )
            ids.append(token_id)
        return ids

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """`encode(text)` and each piece's (start, end) character span in `text` (SentencePiece
        gives byte offsets into the text it was given; a language code is its own span)."""
        spans: list[tuple[int, int]] = []
        rest = text
        if text.startswith(">>") and (end := text.find("<<")) != -1 and text[: end + 2] in self.vocab:
            spans, rest = [(0, end + 2)], text[end + 2 :]
        shift = len(text) - len(rest)
        char_at = [0] * (len(rest.encode("utf-8")) + 1)  # byte offset -> character offset
        position = 0
        for index, character in enumerate(rest):
            width = len(character.encode("utf-8"))
            char_at[position : position + width] = [index] * width
            position += width
        char_at[position] = len(rest)
        pieces = self.processor.encode(rest, out_type="proto").pieces
        spans += [(shift + char_at[p.begin], shift + char_at[p.end]) for p in pieces]
        return self.encode(text), spans

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`; the special ids (pad, bos, eos, unk) are skipped and nothing else."""
        return self.decode_batch([ids])[0]

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        special = self.specials.ids
        out = []
        for ids in batch:
            pieces = [self.pieces.get(int(i), "") for i in ids if int(i) not in special]
            out.append(self.processor.decode_pieces([p for p in pieces if p]))
        return out

    def id_to_token(self, i: int) -> str:
        if i not in self.pieces:
            raise IndexError(f"token id {i} out of range [0, {self.vocab_size})")
        return self.pieces[i]

    def __repr__(self) -> str:
        return f"SentencePieceTokenizer(vocab_size={self.vocab_size}, path={str(self.path)!r})"


def _marian_specials(vocab: dict[str, int], origin: str) -> SpecialTokens:
    """OPUS-MT's ids: `<pad>` also starts every decoder input (`decoder_start_token_id`),
    `</s>` ends every sequence, `<unk>` stands for unknown pieces."""
    missing = [name for name in ("<pad>", "</s>") if name not in vocab]
    if missing:
        raise DataError(f"{origin}: the vocabulary has no {' or '.join(missing)} token")
    return SpecialTokens(vocab["<pad>"], vocab["<pad>"], vocab["</s>"], vocab.get("<unk>"))


def load_sentencepiece(path: str | Path, specials: SpecialTokens | None = None) -> SentencePieceTokenizer:
    """A `.model` file alone (its own ids), or a Marian `.spm` beside its `vocab.json`."""
    path = Path(path)
    vocab_path = path.parent / MARIAN_VOCAB
    if path.suffix == ".spm" and vocab_path.is_file():
        return SentencePieceTokenizer(path, read_vocab(vocab_path), specials, vocab_path)
    return SentencePieceTokenizer(path, None, specials)


def load_marian_tokenizers(
    directory: str | Path, specials: SpecialTokens | None = None
) -> tuple[SentencePieceTokenizer, SentencePieceTokenizer]:
    """OPUS-MT's tokenizers: `source.spm` and `target.spm` over the shared `vocab.json` (two
    objects: the pieces differ, the ids are one vocabulary)."""
    directory = Path(directory)
    vocab_path = directory / MARIAN_VOCAB
    vocab = read_vocab(vocab_path)
    source = SentencePieceTokenizer(directory / MARIAN_SOURCE, dict(vocab), specials, vocab_path)
    target = SentencePieceTokenizer(directory / MARIAN_TARGET, dict(vocab), source.specials, vocab_path)
    return source, target


def save_marian_pair(pair: Any, directory: str | Path) -> None:
    """Write `source.spm`, `target.spm` and `vocab.json` into `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    pair.source.save(directory / MARIAN_SOURCE)
    pair.target.save(directory / MARIAN_TARGET)
    atomic_write_text(directory / MARIAN_VOCAB, json.dumps(pair.source.vocab, ensure_ascii=False, indent=1))
