"""`data.tokenizer`: a kind of tokenizer to train, or a Hugging Face tokenizer to load.

The value is one of

* `bpe`, `char`, `byte_bpe`: trained on the training texts (see `aiayn.data.tokenizer_training`),
  with `<pad> <bos> <eos> <unk>` at ids 0..3;
* a path to a Hugging Face `tokenizer.json`, or to a directory holding one;
* a Hugging Face Hub name such as `gpt2` (`tokenizers.Tokenizer.from_pretrained`: the first
  time it downloads the file, which needs internet; offline it is an error suggesting a path).

A loaded tokenizer's special ids follow `data.special_tokens` and the rules of
`aiayn.data.special_tokens`. It serves both sides of a translation model, as one joint
vocabulary. `Tokenizer.from_spec` and `TokenizerPair.from_spec` (`aiayn.data.tokenizer`) take
this value; this module finds the Hugging Face tokenizer a value names (`read_hf_tokenizer`).
"""

from __future__ import annotations

from pathlib import Path

import tokenizers

from aiayn.core.errors import DataError
from aiayn.data.tokenizer_training import TOKENIZER_KINDS

JOINT_FILE = "tokenizer.json"
SOURCE_FILE = "src_tokenizer.json"
TARGET_FILE = "tgt_tokenizer.json"


def is_trained_kind(spec: str) -> bool:
    """True for the kinds aiayn trains itself ('bpe', 'char', 'byte_bpe')."""
    return spec in TOKENIZER_KINDS


def read_hf_tokenizer(source: str | Path) -> tuple[tokenizers.Tokenizer, Path | None]:
    """The Hugging Face tokenizer `source` names, and the file it was read from (None: the Hub).

    `source` is a `tokenizer.json`, a directory holding one, or, when it is a `str` that does
    not look like a path, a Hub name. A missing file or directory, or an unreadable one, is a
    `DataError` naming it.
    """
    path = Path(source).expanduser()
    if path.is_dir():
        if not (path / JOINT_FILE).is_file():
            raise DataError(f"tokenizer {source}: the directory holds no {JOINT_FILE}")
        path = path / JOINT_FILE
    if path.is_file():
        return _read_file(path), path
    text = str(source)
    if isinstance(source, Path) or text.endswith(".json") or text.startswith((".", "/", "~")) or "\\" in text:
        raise DataError(f"tokenizer {source}: no such file or directory")
    return _from_hub(text), None


def _read_file(path: Path) -> tokenizers.Tokenizer:
    try:
        return tokenizers.Tokenizer.from_str(path.read_text(encoding="utf-8"))
    except Exception as err:  # OSError, UnicodeDecodeError, or tokenizers' plain Exception
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DataError(f"{path}: not a valid tokenizer file ({message})") from None


def _from_hub(name: str) -> tokenizers.Tokenizer:
    try:
        return tokenizers.Tokenizer.from_pretrained(name)
    except Exception as error:  # tokenizers raises a plain Exception for every failure
        reason = (str(error).splitlines() or [type(error).__name__])[0]
        raise DataError(
            f"data.tokenizer {name!r} is not bpe, char or byte_bpe nor a file here, and the Hugging "
            f"Face Hub could not provide it ({reason}); loading a Hub name needs internet the first "
            f"time: offline, pass the path of its tokenizer.json instead (e.g. one downloaded from "
            f"https://huggingface.co/{name}/resolve/main/tokenizer.json)"
        ) from None
