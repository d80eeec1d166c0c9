"""The `data` settings of a classifier run (`aiayn classify train`): 'brackets' or 'tsv' files."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from aiayn.core.settings import setting
from aiayn.training.data_settings import DataSettings, ExampleSettings, HeldOutSettings


@dataclass
class ClassifySettings(ExampleSettings, HeldOutSettings, DataSettings):
    """Labelled texts: the built-in brackets task (`aiayn.classify.brackets`) or TSV files."""

    kind: ClassVar[str] = "classify"
    command: ClassVar[str] = "aiayn classify"

    task: str = setting(
        "brackets", choices=("brackets", "tsv"), help="the built-in brackets task, or TSV files"
    )
    train_tsv: str | None = setting(None, help="task 'tsv': training label<TAB>text")
    valid_tsv: str | None = setting(None, help="task 'tsv': validation label<TAB>text")
