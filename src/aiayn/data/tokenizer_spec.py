"""`data.tokenizer`: a kind of tokenizer to train, or a Hugging Face tokenizer to load.

The value is one of

* `bpe`, `char`, `byte_bpe`: trained on the training texts (see `aiayn.data.tokenizer`), with
  `<pad> <bos> <eos> <unk>` at ids 0..3;
* a path to a Hugging Face `tokenizer.json`, or to a directory holding one;
* a Hugging Face Hub name such as `gpt2` (`tokenizers.Tokenizer.from_pretrained`: the first
  time it downloads the file, which needs internet; offline it is an error suggesting a path).

A loaded tokenizer's special ids follow `data.special_tokens` and the rules of
`aiayn.data.special_tokens`. It serves both sides of a translation model, as one joint
vocabulary. The run files call `make_tokenizer` (one vocabulary: language models,
classifiers) or `make_tokenizers` (translation), and on resume read the run directory's own
files back with the same `data.special_tokens`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import tokenizers

from aiayn.data.special_tokens import check_special_token_names
from aiayn.data.tokenizer import (
    JOINT_FILE,
    TOKENIZER_KINDS,
    Tokenizer,
    TokenizerPair,
    build_tokenizers,
    train_tokenizer,
)
from aiayn.errors import ConfigError, DataError

log = logging.getLogger(__name__)

Names = Mapping[str, str | None] | None


def is_trained_kind(spec: str) -> bool:
    """True for the kinds aiayn trains itself ('bpe', 'char', 'byte_bpe')."""
    return spec in TOKENIZER_KINDS


def load_tokenizer(spec: str, names: Names = None) -> Tokenizer:
    """The Hugging Face tokenizer `spec` names: a `tokenizer.json` file, a directory holding
    one, or a Hub name. `names` is the `data.special_tokens` mapping (role -> token)."""
    names = check_special_token_names(names)
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / JOINT_FILE).is_file():
            raise DataError(f"data.tokenizer {spec}: the directory holds no {JOINT_FILE}")
        path = path / JOINT_FILE
    if path.is_file():
        tokenizer = Tokenizer.load(path, names=names)
    elif spec.endswith(".json") or spec.startswith((".", "/", "~")) or "\\" in spec:
        raise DataError(f"data.tokenizer {spec}: no such file or directory")
    else:
        tokenizer = Tokenizer.from_hf(_from_hub(spec), f"Hugging Face Hub tokenizer {spec!r}", names=names)
    specials = tokenizer.specials
    log.info(
        "loaded tokenizer %s: %d tokens; pad %d, bos %d, eos %d, unk %s",
        spec, tokenizer.vocab_size, specials.pad_id, specials.bos_id, specials.eos_id, specials.unk_id,
    )
    return tokenizer


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


def _no_names_for_trained(spec: str, names: Names) -> None:
    if names:
        raise ConfigError(
            f"data.special_tokens applies to a loaded tokenizer; a trained {spec!r} tokenizer "
            "always has <pad> <bos> <eos> <unk> at ids 0..3"
        )


def make_tokenizer(spec: str, texts: Sequence[str], vocab_size: int, names: Names = None) -> Tokenizer:
    """Train a tokenizer of kind `spec` on `texts` (`vocab_size` tokens), or load the one
    `spec` names (`texts` and `vocab_size` then play no part)."""
    if is_trained_kind(spec):
        _no_names_for_trained(spec, names)
        return train_tokenizer(spec, texts, vocab_size)
    return load_tokenizer(spec, names)


def make_tokenizers(
    spec: str,
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    vocab_size: int,
    joint: bool = True,
    names: Names = None,
) -> TokenizerPair:
    """The tokenizers of a translation model: trained (`build_tokenizers`), or one loaded
    tokenizer for both sides (one joint vocabulary, whatever `joint` says)."""
    if is_trained_kind(spec):
        _no_names_for_trained(spec, names)
        return build_tokenizers(spec, src_texts, tgt_texts, vocab_size, joint=joint)
    if not joint:
        log.warning("data.joint_vocab: false ignored: a loaded tokenizer serves both sides as one vocabulary")
    tokenizer = load_tokenizer(spec, names)
    return TokenizerPair(tokenizer, tokenizer)


def reload_tokenizer(run_dir: str | Path, names: Names = None) -> Tokenizer:
    """The `tokenizer.json` of a run directory (to resume), its ids found as when it was made."""
    return Tokenizer.load(Path(run_dir) / JOINT_FILE, names=check_special_token_names(names))


def reload_tokenizers(run_dir: str | Path, names: Names = None) -> TokenizerPair:
    """The tokenizer file(s) of a translation run directory (to resume)."""
    return TokenizerPair.load(run_dir, names=check_special_token_names(names))
