"""The `data` section of a run's config: the fields every task reads, and the groups two kinds share.

Each task package declares its own settings class (`aiayn.translation.settings`,
`aiayn.lm.settings`, `aiayn.classify.settings`): a subclass of `DataSettings` that redeclares
`task` with its names as choices and adds the fields it reads, either its own or one of the
groups below (each declared once here, as a mixin listed before `DataSettings` so that `task`
stays the first key). `aiayn.tasks` finds the class for a `data.task` name; training knows no
task, only this base.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from aiayn.core.errors import ConfigError
from aiayn.core.ranges import NON_NEGATIVE_INT, POSITIVE_INT, PROBABILITY
from aiayn.core.settings import field_choices, setting, validate


@dataclass
class DataSettings:
    """Where the examples come from and how they are tokenized: the fields every task reads.

    A subclass sets `kind` (its kind of model) and `command` (the command that trains it, as an
    error shows it), and redeclares `task` with a default and its task names as choices. A
    relative path field that does not exist under the working directory is looked up under the
    data root.
    """

    kind: ClassVar[str]
    command: ClassVar[str]

    task: str = setting(help="where the examples come from (one of the names of the task's settings)")
    tokenizer: str = setting(
        "bpe",
        help="a kind to train ('bpe', 'char', 'byte_bpe'), a Hugging Face tokenizer.json (or a "
        "directory holding one) or a Hub name such as 'gpt2' (see `aiayn.data.tokenizer_spec`)",
    )
    special_tokens: dict[str, str | None] | None = setting(
        None, help="the pad/bos/eos/unk tokens of a loaded tokenizer, by name"
    )
    vocab_size: int | str = setting(
        8000, range=POSITIVE_INT, auto=True,
        help="size of a trained tokenizer; 'auto': by the training pairs (aiayn.training.auto_rules)",
    )

    def __post_init__(self) -> None:
        validate(self, "data")
        if not self.tokenizer.strip():
            raise ConfigError(
                "data.tokenizer must be bpe, char, byte_bpe, a tokenizer.json path or a Hub name"
            )

    @classmethod
    def task_names(cls) -> tuple[str, ...]:
        """The `data.task` names this class reads (the choices of its `task` field)."""
        return field_choices(next(f for f in dataclasses.fields(cls) if f.name == "task")) or ()

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Each field's default value, by name."""
        return {
            f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
            for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        }


@dataclass
class ExampleSettings:
    """How many examples a built-in generator makes, from which seed, and the longest one."""

    seed: int = setting(1, range=NON_NEGATIVE_INT, help="seed of the generated examples")
    num_train: int = setting(50000, range=NON_NEGATIVE_INT, help="generated training examples")
    num_valid: int = setting(1000, range=NON_NEGATIVE_INT, help="generated validation examples")
    num_test: int = setting(1000, range=NON_NEGATIVE_INT, help="generated test examples")
    max_sentence_tokens: int = setting(
        128,
        range=POSITIVE_INT,
        help="longest example in tokens: a longer sentence pair is dropped, a longer text to classify "
        "cut (and a generator makes none longer); not `model.max_len`",
    )


@dataclass
class TokenStoreSettings:
    """Where the token stores are kept and how much text a trained tokenizer learns from."""

    cache_dir: str | None = setting(
        None, help="where token stores are kept (None: $AIAYN_CACHE, else .cache beside the run directory)"
    )
    tokenizer_sample: int = setting(
        2_000_000, range=POSITIVE_INT,
        help="pairs (lines) a trained tokenizer learns from, drawn reproducibly when there are more",
    )


@dataclass
class HeldOutSettings:
    """The share of one file held out for validation."""

    valid_fraction: float = setting(
        0.1, range=PROBABILITY, help="held-out share of the one training file"
    )
