"""The layout of a CTranslate2 directory written by `aiayn export ctranslate2`: its file names,
the model description aiayn keeps beside CTranslate2's files, and the token names of its
vocabularies. The writer (`aiayn.export.ctranslate2`) and the reader (`aiayn.inference.ctranslate2`)
both import it; neither imports the other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from aiayn.core.errors import CheckpointError
from aiayn.formats.model_dir import config_from_dict
from aiayn.model.config import ModelConfig

if TYPE_CHECKING:
    from aiayn.data.tokenizer import Tokenizer

AIAYN_FILE = "aiayn.json"
"""Our model settings (the model directory's `config.json`) inside a CTranslate2 export."""
CT2_WEIGHTS = "model.bin"
"""CTranslate2's weights file, which marks the directory as an export."""


def is_ctranslate2_dir(directory: str | Path) -> bool:
    """True for a directory holding a CTranslate2 model (`model.bin`)."""
    return (Path(directory) / CT2_WEIGHTS).is_file()


def read_export(directory: Path) -> tuple[str, ModelConfig]:
    """The model type ('transformer' or 'decoder_only') and the `ModelConfig` stored in an
    export's `aiayn.json`."""
    path = directory / AIAYN_FILE
    if not path.is_file():
        raise CheckpointError(
            f"{directory} holds a CTranslate2 model but no {AIAYN_FILE}: only directories written "
            "by `aiayn export ctranslate2` can be run by aiayn"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return str(data["model_type"]), config_from_dict(data["config"], path)
    except (ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"{path}: not an aiayn model description ({error})") from None


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
