"""What a kind of model supplies to a training run, and what the `Trainer` asks of a batch.

Translation (`aiayn train`), the language model (`aiayn lm train`) and the classifier
(`aiayn classify train`) share one run skeleton (`aiayn.training.run.run_task`): threads and
seed, tokenizer training on rank 0 and broadcast, run directory, log file, torchrun session,
the `Trainer`, results file. Each supplies only what differs, as a `Task`: its data, its
model, its loss, its validation metrics (each a `Metric` that says whether higher or lower is
better), and what goes into `results.json` once the best model is chosen.

The `Trainer` itself needs only a `BatchedDataset` (`aiayn.data.batching`) of `TrainBatch`es
and a `LossFn` over them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import torch
from torch import Tensor, nn

from aiayn.data.batching import BatchedDataset
from aiayn.data.tokenizer import JOINT_FILE, Tokenizer
from aiayn.errors import ConfigError
from aiayn.model import ModelConfig
from aiayn.training.config import DataConfig, RunConfig
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

Evaluate = Callable[[nn.Module], dict[str, float]]
"""`evaluate(model) -> {metric name: value}`: validation metrics besides the loss."""

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


def load_joint_tokenizer(directory: Path) -> Tokenizer:
    """The one tokenizer of a model directory (`tokenizer.json`)."""
    return Tokenizer.load(Path(directory) / JOINT_FILE)


def save_joint_tokenizer(tokenizer: Tokenizer, directory: Path) -> None:
    """Write `tokenizer` as a model directory's `tokenizer.json`."""
    tokenizer.save(Path(directory) / JOINT_FILE)


def accept_config(config: RunConfig) -> None:
    """A task's `check_config` when it has nothing to check."""


@dataclass(frozen=True, kw_only=True)
class Task(Generic[TokenizerT, DataT]):
    """One kind of model: what `run_task` needs besides the steps every run shares.

    The fields come in the order the run uses them:

    Attributes:
        check_config: raise `ConfigError` unless the config suits the task; may resolve data
            paths in place, so that the saved config finds them from any directory.
        prepare_data: `(config.data, tokenizer or None) -> data`: read and encode the splits,
            training the tokenizer first when none is given (rank 0; the others get it).
        tokenizer: `data -> tokenizer` it was encoded with (sent from rank 0 to the others).
        load_tokenizer, save_tokenizer: read it from, write it into, a model directory
            (default: one joint `tokenizer.json`).
        build_model: `(config, data) -> model`, a fresh model for the data's vocabulary.
        loss: the `LossFn` over the data's batches.
        target_unit: what the loss counts ('tokens' or 'examples'), for `results.json`'s
            `target_<unit>` and `<unit>_per_s`.
        metrics: what `validation_metrics` reports, each with its direction;
            `train.validation_metric` names one of these or `loss`/`ppl`.
        validation_metrics: `(model, config, data) -> {name: value}` at every validation.
        final_results: `(best model, config, data, final state) -> dict` that `results.json`
            adds for this task (rank 0 only).
        command: the CLI command that trains it, for "Resume with: COMMAND --resume RUN_DIR".
    """

    check_config: Callable[[RunConfig], None] = accept_config
    prepare_data: Callable[[DataConfig, TokenizerT | None], DataT]
    tokenizer: Callable[[DataT], TokenizerT] = attrgetter("tokenizer")
    load_tokenizer: Callable[[Path], TokenizerT] = load_joint_tokenizer  # type: ignore[assignment]
    save_tokenizer: Callable[[TokenizerT, Path], None] = save_joint_tokenizer  # type: ignore[assignment]
    build_model: Callable[[RunConfig, DataT], nn.Module]
    loss: LossFn[Any]
    target_unit: str = "tokens"
    metrics: tuple[Metric, ...] = ()
    validation_metrics: Callable[[nn.Module, RunConfig, DataT], dict[str, float]] | None = None
    final_results: Callable[[nn.Module, RunConfig, DataT, TrainState], dict[str, Any]] | None = None
    command: str


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
