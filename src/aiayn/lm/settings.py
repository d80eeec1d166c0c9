"""The `data` settings of a language-model run (`aiayn lm train`): task 'text' and its fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from aiayn.core.errors import ConfigError
from aiayn.core.ranges import POSITIVE_INT
from aiayn.core.settings import setting
from aiayn.training.data_settings import DataSettings, HeldOutSettings, TokenStoreSettings


@dataclass
class LMSettings(TokenStoreSettings, HeldOutSettings, DataSettings):
    """One text file, cut into windows of `block_size` tokens."""

    kind: ClassVar[str] = "lm"
    command: ClassVar[str] = "aiayn lm"

    task: str = setting("text", choices=("text",), help="a text file (`text_file`)")
    text_file: str | None = setting(None, help="the text a language model learns")
    block_size: int = setting(256, range=POSITIVE_INT, help="tokens per training window")
    stride: int | None = setting(
        None, range=POSITIVE_INT, help="tokens between window starts (None: block_size)"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.stride is not None and self.stride > self.block_size:
            raise ConfigError(
                f"data.stride must be between 1 and data.block_size ({self.block_size}), got {self.stride}"
            )
