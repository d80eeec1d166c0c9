"""What both exporters share: reading a model directory, token names, the output directory.

An export reads an aiayn model directory (`config.json`, `model.safetensors`, tokenizer
files) and writes a new directory in another runtime's format. The special-token ids come
from the model's `ModelConfig` (`pad_id`, `bos_id`, `eos_id`, `unk_id`), never from constants:
a vocabulary may keep its special tokens anywhere.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from torch import nn

from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer import JOINT_FILE, Tokenizer, TokenizerPair
from aiayn.errors import CheckpointError, ConfigError
from aiayn.files import atomic_directory, write_errors
from aiayn.model.config import ModelConfig
from aiayn.model_dir import load_model, read_model_json

EXTRA = "export"
"""The pip extra that brings CTranslate2 and Hugging Face Transformers."""


def require(module: str, feature: str) -> ModuleType:
    """Import `module`, or raise `ConfigError` naming the pip extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"{feature} needs the Python package {module!r}, which comes with aiayn's optional "
            f"extra {EXTRA!r}: pip install 'aiayn[{EXTRA}]'"
        ) from None


@dataclass
class ExportSource:
    """A loaded model directory: the model in eval mode, its JSON and its tokenizer(s).

    `tokenizers` is the `TokenizerPair` of a translation model; a language model has one
    tokenizer, used for both sides.
    """

    directory: Path
    model: nn.Module
    model_json: dict[str, Any]
    tokenizers: TokenizerPair

    @property
    def config(self) -> ModelConfig:
        return self.model.config  # type: ignore[return-value]

    @property
    def model_type(self) -> str:
        return self.model_json["model_type"]


def load_source(directory: str | Path) -> ExportSource:
    """Read a model directory for export; the encoder-only classifier is refused."""
    directory = Path(directory)
    model_json = read_model_json(directory)
    if model_json["model_type"] == "encoder_only":
        raise CheckpointError(
            f"{directory} holds an encoder-only classifier; only translation models "
            "(encoder-decoder) and language models (decoder-only) can be exported"
        )
    model = load_model(directory, "cpu").eval()
    tokenizers = load_tokenizers(directory, model.config, model_json["model_type"])
    return ExportSource(directory, model, model_json, tokenizers)


def refuse_other_head_dim(config: ModelConfig, target: str) -> None:
    """Raise `ConfigError` for heads of another width than d_model / num_heads (`head_dim`, Table 3
    row B): the exported formats derive d_k from d_model and the number of heads."""
    if config.head_dim is not None and config.head_dim * config.num_heads != config.d_model:
        raise ConfigError(
            f"{target} cannot represent ModelConfig.head_dim={config.head_dim} (it needs head_dim x "
            f"num_heads = d_model = {config.d_model}, here {config.num_heads} heads)"
        )


def load_tokenizers(directory: Path, config: ModelConfig, model_type: str) -> TokenizerPair:
    """The tokenizer(s) of a model directory, with the model's special ids (a language model's
    one tokenizer serves as both sides)."""
    specials = SpecialTokens.of(config)
    if model_type == "decoder_only":
        tokenizer = Tokenizer.load(directory / JOINT_FILE, specials)
        tokenizers = TokenizerPair(tokenizer, tokenizer)
    else:
        tokenizers = TokenizerPair.load(directory, specials)
    source_size = config.tgt_vocab_size if model_type == "decoder_only" else config.src_vocab_size
    tokenizers.source.check_fits(source_size, "the model's source embedding")
    tokenizers.target.check_fits(config.tgt_vocab_size, "the model's target embedding")
    return tokenizers


def vocabulary(tokenizer: Tokenizer, size: int, side: str) -> list[str]:
    """The token string of every id 0 .. size-1 of a model vocabulary.

    Ids the model has but the tokenizer does not name (an embedding larger than the
    vocabulary, or a gap in a loaded tokenizer's ids) are named `<aiayn_unused_ID>`: the
    engines map tokens by name, so names must be unique.
    """
    tokenizer.check_fits(size, f"the model's {side} vocabulary")
    tokens = []
    for i in range(size):
        try:
            tokens.append(tokenizer.id_to_token(i))
        except IndexError:
            tokens.append(f"<aiayn_unused_{i}>")
    seen: dict[str, int] = {}
    for i, token in enumerate(tokens):
        if token in seen:
            raise CheckpointError(
                f"the {side} vocabulary names token {token!r} twice (ids {seen[token]} and {i})"
            )
        seen[token] = i
    return tokens


@contextlib.contextmanager
def output_directory(out: str | Path, overwrite: bool) -> Iterator[Path]:
    """Yield an empty temporary directory beside `out`; on success it becomes `out`.

    A failed export leaves nothing behind (a full disk or a file-size limit is a one-line
    `WriteError`); an existing `out` is refused unless `overwrite` (then it is replaced only
    once the new directory is complete).
    """
    out = Path(out)
    if out.exists() and not overwrite:
        raise ConfigError(f"--out {out} already exists; pass --overwrite to replace it")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a directory")
    with write_errors(out), atomic_directory(out) as tmp:
        yield tmp
