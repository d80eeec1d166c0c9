"""The `data` settings of a translation run (`aiayn train`): the task names it reads and its fields.

`task` is a built-in synthetic task ('copy', 'reverse', 'dates', `aiayn.data.synthetic`),
'multi30k' (read from `multi30k/` under the data root) or 'files' (the `train_src`/`train_tgt`/...
paths, or the corpora of `train`; see `aiayn.translation.data`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from aiayn.core.ranges import Range
from aiayn.core.settings import setting
from aiayn.data.synthetic import TASKS as SYNTHETIC_TASKS
from aiayn.training.data_settings import DataSettings, ExampleSettings, TokenStoreSettings


@dataclass
class TranslationSettings(ExampleSettings, TokenStoreSettings, DataSettings):
    """Sentence pairs and their tokenizers (see the module docstring for `task`)."""

    kind: ClassVar[str] = "translation"
    command: ClassVar[str] = "aiayn train"

    task: str = setting(
        "dates", choices=(*SYNTHETIC_TASKS, "multi30k", "files"), help="where the sentence pairs come from"
    )
    src_lang: str = setting("de", help="source language (multi30k, file names)")
    tgt_lang: str = setting("en", help="target language (multi30k, file names)")
    download: bool = setting(False, help="fetch multi30k when it is missing")
    train_src: str | None = setting(None, help="task 'files': training sources")
    train_tgt: str | None = setting(None, help="task 'files': training targets")
    valid_src: str | None = setting(None, help="task 'files': validation sources")
    valid_tgt: str | None = setting(None, help="task 'files': validation targets")
    test_src: str | None = setting(None, help="task 'files': test sources")
    test_tgt: str | None = setting(None, help="task 'files': test targets")
    valid_from_train: bool = setting(
        False, help="task 'files' without valid_src/valid_tgt: split a validation set off the training "
        "pairs (seeded, saved in the run directory, removed from training)",
    )
    joint_vocab: bool = setting(True, help="one tokenizer for source and target")
    train: list[dict[str, Any]] | None = setting(
        None,
        help="task 'files': several training corpora, each {src: FILE, tgt: FILE} or a Hugging "
        "Face dataset {hf: NAME|parquet|json|csv, ...}, with an optional sampling weight "
        "(see aiayn.translation.data)",
    )
    max_length_ratio: float | None = setting(
        9.0, range=Range(low=1),
        help="drop training pairs whose longer side has more than this times the shorter's tokens "
        "(Moses clean-corpus: 9; None: keep)",
    )
    remove_duplicates: bool = setting(False, help="drop repeated training pairs (always counted)")
    remove_test_overlap: bool = setting(
        False, help="drop training pairs that are validation or test pairs (always counted)"
    )


def files_config_path() -> Path:
    """The embedded recipe for your own files (`aiayn train --train-src A --train-tgt B`): every
    setting that can be 'auto' is."""
    return Path(__file__).resolve().parent.parent / "configs" / "files.yaml"
