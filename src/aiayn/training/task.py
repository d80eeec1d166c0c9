"""What a kind of model supplies to a training run, and what the `Trainer` asks of a batch.

Translation (`aiayn train`), the language model (`aiayn lm train`) and the classifier
(`aiayn classify train`) share one run skeleton (`aiayn.training.run.run_task`): threads and
seed, tokenizer training on rank 0 and broadcast, run directory, log file, torchrun session,
the `Trainer`, results file. Each supplies only what differs, as a subclass of `Task`
(`aiayn.translation.task.TranslationTask`, `aiayn.lm.run.LMTask`,
`aiayn.classify.run.ClassifyTask`): its data, its model, its loss, its validation metrics
(each a `Metric` that says whether higher or lower is better), and what goes into
`results.json` once the best model is chosen.

The `Trainer` itself needs only a `BatchedDataset` (`aiayn.data.batching`) of `TrainBatch`es
and a `LossFn` over them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import torch
from torch import Tensor, nn

from aiayn.core.errors import ConfigError
from aiayn.data.batching import BatchedDataset
from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer import JOINT_FILE, Names, Tokenizer
from aiayn.model import ModelConfig
from aiayn.training.auto_rules import Choice, CorpusProfile
from aiayn.training.config import RunConfig
from aiayn.training.data_settings import DataSettings
from aiayn.training.state import TrainState


class TrainBatch(Protocol):
    """A batch the `Trainer` can train on."""

    @property
    def num_targets(self) -> int:
        """The number of predictions the loss sums over (target tokens, or examples)."""
        ...

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Any:
        """A copy with the tensors on `device`."""
        ...


BatchT = TypeVar("BatchT", bound=TrainBatch)

LossFn = Callable[[nn.Module, BatchT, float], tuple[Tensor, int]]
"""`loss_fn(model, batch, smoothing) -> (summed loss, number of predictions summed over)`."""

Evaluate = Callable[..., dict[str, float]]
"""`evaluate(model, allowance_s=None) -> {metric name: value}`: validation metrics besides the loss,
taking at most about `allowance_s` seconds where they decode (the `Trainer`'s validation time cap,
`train.bleu_time_share`; None: no limit)."""

SaveExtra = Callable[[Path], None]
"""`save_extra(directory)`: write the files that belong with every saved model (the tokenizer)."""


@dataclass(frozen=True)
class Metric:
    """A validation metric, and which way is better (JoeyNMT's `minimize_metric`)."""

    name: str
    higher_is_better: bool

    def improves(self, value: float, best: float | None) -> bool:
        """Whether `value` beats `best` (None: nothing to beat yet)."""
        if best is None:
            return True
        return value > best if self.higher_is_better else value < best


LOSS = Metric("loss", higher_is_better=False)
PERPLEXITY = Metric("ppl", higher_is_better=False)
TRAINER_METRICS = (LOSS, PERPLEXITY)  # what the Trainer measures itself on validation data


def find_metric(name: str, metrics: tuple[Metric, ...]) -> Metric:
    """The metric called `name` among the Trainer's own and `metrics`; `ConfigError` naming
    the choices when there is none (e.g. `train.validation_metric: bleu` for a classifier)."""
    known = (*TRAINER_METRICS, *metrics)
    for metric in known:
        if metric.name == name:
            return metric
    raise ConfigError(
        f"train.validation_metric must be one of {', '.join(m.name for m in known)} for this "
        f"task; got {name!r}"
    )


class TaskData(Protocol):
    """What the run skeleton reads from a task's prepared data: the encoded splits."""

    @property
    def train(self) -> BatchedDataset[Any]: ...

    @property
    def valid(self) -> BatchedDataset[Any] | None: ...


TokenizerT = TypeVar("TokenizerT")
DataT = TypeVar("DataT", bound=TaskData)


class Task(ABC, Generic[TokenizerT, DataT]):
    """One kind of model: what `run_task` needs besides the steps every run shares.

    A subclass sets `command` (and `target_unit`, `metrics` where they differ from the
    defaults) and implements the abstract methods; the others have defaults that do nothing.
    The methods come in the order the run calls them.

    Attributes:
        command: the CLI command that trains it, for "Resume with: COMMAND --resume RUN_DIR".
        data_settings: the class of the `data` section it reads (its package's settings).
        model_type: the `model_type` of the model directories it writes (and starts from,
            `--init-from`).
        target_unit: what the loss counts ('tokens' or 'examples'), for `results.json`'s
            `target_<unit>` and `<unit>_per_s`.
        metrics: what `validation_metrics` reports, each with its direction;
            `train.validation_metric` names one of these or `loss`/`ppl`.
        uses_store: the training data is a token store (`aiayn.data.token_store`): then
            `prepare_data` also takes `cache_dir=` (where the stores are) and `create=` (False:
            open the store, never make it), and `tokenizer_digest` identifies the tokenizer.
        implementation: the `train.implementation` it trains with; `implementations`: those
            its command offers (another one is another `Task`, which the command picks).
        measures_corpus: `corpus_profile` measures its training pairs, so the settings that
            read a corpus (`data.vocab_size`, `model.preset`, `train.bleu_max_sentences`) may be
            'auto' (`aiayn.training.auto_settings`).
    """

    command: ClassVar[str]
    data_settings: ClassVar[type[DataSettings]]
    implementation: ClassVar[str] = "engine"
    implementations: ClassVar[tuple[str, ...]] = ("engine",)
    uses_store: ClassVar[bool] = False
    measures_corpus: ClassVar[bool] = False
    model_type: ClassVar[str]
    target_unit: ClassVar[str] = "tokens"
    metrics: ClassVar[tuple[Metric, ...]] = ()

    def check_config(self, config: RunConfig) -> None:
        """Raise `ConfigError` unless the config suits the task; may resolve data paths in
        place, so that the saved config finds them from any directory. Default: nothing."""

    def check_data(self, config: RunConfig) -> None:
        """Before the run directory is claimed (rank 0): raise `DataError` unless the data the
        config names can be read (files found, readable, UTF-8, line-aligned), so that a start
        that cannot train leaves no directory behind. Default: nothing."""

    def split_validation(self, config: RunConfig, run_dir: Path) -> dict[str, Any] | None:
        """Before the data is prepared (rank 0, a new run): split a validation set off the
        training data into `run_dir` when none is given, and return the `data` settings that
        read it (every rank sets them). Default: nothing (None)."""
        return None

    @abstractmethod
    def prepare_data(self, data: DataSettings, tokenizer: TokenizerT | None) -> DataT:
        """Read and encode the splits, making the tokenizer first (`data.tokenizer`) when none
        is given (rank 0 makes it; the others get it)."""

    @abstractmethod
    def tokenizer(self, data: DataT) -> TokenizerT:
        """The tokenizer `data` was encoded with (sent from rank 0 to the others)."""

    def tokenizer_digest(self, data: DataT) -> str:
        """A hash of the tokenizer of `data`, compared across ranks (a `uses_store` task)."""
        raise NotImplementedError

    @abstractmethod
    def load_tokenizer(self, directory: Path, names: Names) -> TokenizerT:
        """The tokenizer saved by `save_tokenizer` in a run directory, its special ids found
        again from `data.special_tokens` (`names`) as when it was made."""

    @abstractmethod
    def save_tokenizer(self, tokenizer: TokenizerT, directory: Path) -> None:
        """Write `tokenizer` into a model directory."""

    @abstractmethod
    def model_tokenizer(self, directory: Path, specials: SpecialTokens) -> TokenizerT:
        """The tokenizer of a model directory (`--init-from`), with the model's special ids."""

    @abstractmethod
    def build_model(self, config: RunConfig, data: DataT) -> nn.Module:
        """A fresh model for the data's vocabulary."""

    @abstractmethod
    def loss(self, model: nn.Module, batch: Any, smoothing: float) -> tuple[Tensor, int]:
        """The `LossFn` over the data's batches: (summed loss, number of predictions)."""

    def data_choices(self, data: DataT) -> tuple[Choice, ...]:
        """The data settings its preparation chose at `auto` (`data.vocab_size`). Default: none."""
        return ()

    def corpus_profile(self, data: DataT) -> CorpusProfile | None:
        """The training corpus as the `auto` rules read it (a `measures_corpus` task). Default: None."""
        return None

    def validation_metrics(
        self, model: nn.Module, config: RunConfig, data: DataT, allowance_s: float | None = None
    ) -> dict[str, float]:
        """`{name: value}` of `metrics` at every validation, taking at most about `allowance_s`
        seconds where it decodes (None: no limit; see `aiayn.translation.validation`). Default: none."""
        return {}

    def final_results(
        self, best: nn.Module, config: RunConfig, data: DataT, state: TrainState
    ) -> dict[str, Any]:
        """What `results.json` adds for this task, from the best model (rank 0 only).
        Default: nothing."""
        return {}


class OneTokenizerTask(Task[Tokenizer, DataT]):
    """A task with one tokenizer, kept as a model directory's `tokenizer.json` (the language
    model, the classifier); its data holds it as `data.tokenizer`."""

    def load_tokenizer(self, directory: Path, names: Names) -> Tokenizer:
        return Tokenizer.load(Path(directory) / JOINT_FILE, names=names)

    def save_tokenizer(self, tokenizer: Tokenizer, directory: Path) -> None:
        tokenizer.save(Path(directory) / JOINT_FILE)

    def model_tokenizer(self, directory: Path, specials: SpecialTokens) -> Tokenizer:
        return Tokenizer.load(Path(directory) / JOINT_FILE, specials)


def preset_config(
    config: RunConfig, *, fixed: dict[str, Any], defaults: dict[str, Any]
) -> ModelConfig:
    """The `ModelConfig` of `config.model` (preset and overrides) for a task's data.

    `fixed` fields (vocabulary sizes, label names: they come from the data) override the
    user's; `defaults` (e.g. `max_len`) fill in what the user did not set. The `extra` dicts
    merge the same way: `defaults["extra"]`, then the user's keys, then `fixed["extra"]`.
    """
    user = dict(config.model.overrides)
    user_extra = user.get("extra") or {}
    if not isinstance(user_extra, dict):
        raise ConfigError(f"model.extra must be a mapping, got {user_extra!r}")
    extra = {**defaults.get("extra", {}), **user_extra, **fixed.get("extra", {})}
    return ModelConfig.preset(config.model.preset, **{**defaults, **user, **fixed, "extra": extra})
