"""The run skeleton every task shares: config -> run directory -> data -> model -> `Trainer`
-> `results.json`.

`run_task(task, config, run_dir)` does, in order, for any `Task` (translation, language
model, classifier; see `aiayn.training.task`):

1. check the config for the task (and that `train.validation_metric` is one it reports);
2. check the data files (`Task.check_data`: found, readable, UTF-8, line-aligned), then
   prepare the run directory and take its lock, held until the run ends (rank 0; see
   `aiayn.training.run_lock`), and copy aiayn's log to its `train.log` (rank 0);
3. set the thread count, the seed and the process's memory settings (`aiayn.training.memory`);
4. prepare the data: rank 0 trains or loads the tokenizer (`data.tokenizer`, see
   `aiayn.data.tokenizer`) and sends it to the other ranks (on
   `--resume` every rank reads it from the run directory), and saves it at the root; a task
   whose training data is a token store (translation, the language model) has it prepared
   once per machine by local rank 0 and memory-mapped by every rank (`shared_data`);
5. build the model (with `model.dropout` or `train.batch_tokens` at `auto`, after timing it to
   choose them: `aiayn.training.auto_settings`) and train it with the `Trainer` (which writes
   checkpoints, metrics and the best model);
6. reload the best model (rank 0), add the task's final results, write `results.json`.

A start that fails before training begins removes the run directory it made (see
`hold_run_dir`), so the same command runs again once the error is fixed.

`train_in_session` runs it alone or under torchrun, as the `aiayn ... train` commands do.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shlex
import sys
import tempfile
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import torch

from aiayn.core.errors import AiaynError, ConfigError, DataError
from aiayn.core.files import atomic_write_text
from aiayn.data.token_store import cache_dir_for
from aiayn.formats import is_model_dir, load_model, meta_model
from aiayn.formats.model_card import write_model_card
from aiayn.runtime.cpu import cpu_model
from aiayn.training.auto_settings import (
    check_auto_supported,
    choose_auto_settings,
    expected_updates,
    take_auto_settings,
)
from aiayn.training.checkpoint import check_resume_model
from aiayn.training.config import RunConfig
from aiayn.training.data_settings import TokenStoreSettings
from aiayn.training.device import select_device
from aiayn.training.distributed import (
    DistContext,
    all_gather_object,
    broadcast_object,
    distributed_session,
    rank_device,
)
from aiayn.training.init_from import MODEL_CLASSES, InitSource, freeze
from aiayn.training.loss import validation_loss
from aiayn.training.memory import check_training_fits, release_free_memory, tune_for_training
from aiayn.training.precision import use_float32_attention
from aiayn.training.run_dir import (
    CONFIG_FILE,
    RunStart,
    fresh_run_dir,
    log_to_file,
    prepare_run_dir,
    remove_failed_start,
)
from aiayn.training.state import StopRequested, TrainState
from aiayn.training.task import DataT, Task, TokenizerT, find_metric
from aiayn.training.trackers import check_trackers
from aiayn.training.trainer import Trainer

log = logging.getLogger(__name__)

RESULTS_FILE = "results.json"


def run_task(
    task: Task[TokenizerT, DataT],
    config: RunConfig,
    run_dir: Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    dist: DistContext | None = None,
) -> dict[str, Any]:
    """Train `task` as configured into `run_dir`; returns (and on rank 0 writes) the results.

    Under torchrun pass the `DistContext` of `aiayn.training.distributed.distributed_session`
    (or use `train_in_session`): rank 0 alone writes the run directory and reports.
    """
    dist = dist or DistContext()
    run_dir = Path(run_dir)
    check_run(task, config)
    check_data = partial(task.check_data, config)  # before the run directory is claimed
    with (
        hold_run_dir(run_dir, resume, overwrite, dist, check_data) as start,
        log_to_file(run_dir, enabled=dist.is_main),
    ):
        return _train_and_report(task, config, run_dir, resume, dist, start)


def check_run(task: Task[Any, Any], config: RunConfig) -> None:
    """Every check of the settings that needs no data: before any work."""
    check_implementation(task, config.train.implementation)
    task.check_config(config)
    check_data_settings(task, config)
    check_trackers(config.train.report_to)  # a tracker not installed
    find_metric(config.train.validation_metric, task.metrics)
    check_auto_supported(config, task.measures_corpus)


def choose_settings(task: Task[Any, Any], config: RunConfig, run_dir: Path) -> dict[str, dict[str, Any]]:
    """Choose every setting `config` leaves at `auto` (in place) as a run into `run_dir` would
    at its start-up: the data prepared (or found) in the cache the run will use, the model timed;
    nothing trained, no run directory made (`--print-config`). Returns the choices and reasons."""
    check_run(task, config)
    stores = isinstance(config.data, TokenStoreSettings)
    cache_dir = config.data.cache_dir if stores else None
    try:
        if stores:  # the store where the run will look for it, not beside the scratch directory
            config.data.cache_dir = str(cache_dir_for(cache_dir, Path(run_dir)))
        with tempfile.TemporaryDirectory(prefix="aiayn-settings-") as scratch:
            return _set_up(task, config, Path(scratch), False, DistContext()).chosen
    finally:
        if stores:
            config.data.cache_dir = cache_dir


def check_data_settings(task: Task[Any, Any], config: RunConfig) -> None:
    """Raise `ConfigError` unless `config`'s `data` section is one that `task` reads."""
    if not isinstance(config.data, task.data_settings):
        names = ", ".join(task.data_settings.task_names())
        raise ConfigError(
            f"{task.command} needs data.task one of {names}; got {config.data.task!r} "
            f"(a task of {type(config.data).command})"
        )


def check_implementation(task: Task[Any, Any], implementation: str) -> None:
    """Raise `ConfigError` unless `task` trains with `train.implementation` (the command picks
    the task of the implementation asked for, among the `implementations` it offers)."""
    if implementation not in task.implementations:
        raise ConfigError(f"train.implementation={implementation}: {task.command} has no {implementation} "
                          f"implementation (it has {', '.join(task.implementations)})")
    if implementation != task.implementation:
        raise ConfigError(
            f"train.implementation={implementation}, but {type(task).__name__} trains with "
            f"{task.implementation!r}: give run_task the {implementation} task, as {task.command} does"
        )


@contextlib.contextmanager
def hold_run_dir(
    run_dir: Path, resume: bool, overwrite: bool, dist: DistContext,
    check_data: Callable[[], None] | None = None,
) -> Iterator[RunStart]:
    """Rank 0 checks the data (`check_data`: `Task.check_data`), then prepares the run directory
    and holds its lock while the block runs (see `aiayn.training.run_lock`); the other ranks wait
    for the outcome and stop with rank 0's error when it could not.

    A start that fails before training begins (`RunStart.began`; a check that can only come with
    the data, such as the tokenizer's) removes the directory it claimed, when it made it or emptied
    it (`--overwrite`), and says so: what is left never blocks the next try."""
    lock, failure, claimed = None, None, False
    if dist.is_main:
        try:
            if check_data is not None:
                check_data()
            claimed = fresh_run_dir(run_dir, resume, overwrite)
            lock = prepare_run_dir(run_dir, resume, overwrite)
        except AiaynError as error:
            failure = error
    message = broadcast_object(str(failure) if failure else None, dist)
    if failure is not None:
        raise failure
    if message is not None:
        raise ConfigError(message)
    start = RunStart()
    with lock or contextlib.nullcontext():
        try:
            yield start
        except AiaynError:
            if dist.is_main and claimed and not start.began:
                remove_failed_start(run_dir)
            raise


def resolve_init(
    task: Task[TokenizerT, DataT], config: RunConfig, run_dir: Path, resume: bool, dist: DistContext
) -> InitSource | None:
    """`train.init_from` resolved on every rank (rank 0 imports a Transformers source into the
    run directory; the others read what it wrote), and checked against the task and config.
    On resume the architecture is the run directory's own model, when one was saved."""
    source = config.train.init_from
    if source is None:
        return None
    init, failure = None, None
    if dist.is_main:
        try:
            saved = resume and is_model_dir(run_dir)
            init = InitSource.resolve(str(run_dir) if saved else source, run_dir)
        except AiaynError as error:
            failure = str(error)
    directory, failure = broadcast_object((str(init.directory) if init else None, failure), dist)
    if failure is not None:
        raise ConfigError(failure)
    init = init or InitSource.resolve(directory, run_dir)
    init.source = source
    init.check_task(task.model_type, task.command)
    init.check_data_tokenizer(config.data.tokenizer)
    init.model_config(config.model.overrides)  # a contradicting model.* key fails before any work
    return init


def shared_data(
    task: Task[TokenizerT, DataT],
    config: RunConfig,
    run_dir: Path,
    resume: bool,
    dist: DistContext,
    init: InitSource | None = None,
) -> DataT:
    """The task's data, encoded alike on every rank: with the run directory's tokenizer on
    resume, the source model's with `--init-from`, else with the tokenizer that rank 0 trains
    or loads and sends to the others.

    A task whose training data lives in a token store (`Task.uses_store`) is prepared instead
    by local rank 0 of each machine into the cache directory (`data.cache_dir`, `$AIAYN_CACHE`,
    else `.cache` beside the run directory), or found there; the other ranks wait, then open
    the same store; every rank checks that all hold the same tokenizer.
    """
    tokenizer = None
    if init is not None:  # the source's vocabulary as-is (on resume: the run directory's model)
        tokenizer = task.model_tokenizer(init.directory, init.specials)
        init.check_tokenizer(tokenizer)
    elif resume:
        tokenizer = task.load_tokenizer(run_dir, config.data.special_tokens)
    if task.uses_store:
        return _store_data(task, config, run_dir, tokenizer, dist)
    if tokenizer is not None:
        return task.prepare_data(config.data, tokenizer)
    data = task.prepare_data(config.data, None) if dist.is_main else None
    tokenizer = broadcast_object(task.tokenizer(data) if data is not None else None, dist)
    return data if data is not None else task.prepare_data(config.data, tokenizer)


def _store_data(
    task: Task[TokenizerT, DataT], config: RunConfig, run_dir: Path, tokenizer: TokenizerT | None,
    dist: DistContext,
) -> DataT:
    """`shared_data` for a task whose training data is a token store (`tokenizer` None: the
    store's preparation trains or loads the one `data.tokenizer` names)."""
    if not isinstance(config.data, TokenStoreSettings):
        raise TypeError(f"{type(task).__name__} keeps a token store: its settings need TokenStoreSettings")
    cache = cache_dir_for(config.data.cache_dir, run_dir)
    data, failure = None, None
    if dist.local_rank == 0:
        try:
            data = task.prepare_data(config.data, tokenizer, cache_dir=cache)
        except AiaynError as error:
            failure = error
    failures = [f for f in all_gather_object(str(failure) if failure else None, dist) if f]
    if failure is not None:
        raise failure
    if failures:  # stop with the preparing rank's error rather than wait for it forever
        raise DataError(f"the token store could not be prepared: {failures[0]}")
    if data is None:
        data = task.prepare_data(config.data, tokenizer, cache_dir=cache, create=False)
    digests = all_gather_object(task.tokenizer_digest(data), dist)
    if len(set(digests)) > 1:
        raise DataError(
            "the ranks prepared different tokenizers (each machine trains its own from the same data): "
            "give every machine the same data.tokenizer file, or one shared data.cache_dir"
        )
    return data


class RunSetup(NamedTuple):
    """What a run's start-up made before its model: the data, the model's builder, where it
    starts from, and the `auto` choices (`chosen`: name -> value and reason)."""

    data: Any
    init: InitSource | None
    build_model: Callable[[], torch.nn.Module]
    save_tokenizer: Callable[[Path], None]
    chosen: dict[str, dict[str, Any]]
    measured_precision: str  # what `train.precision: auto` timed ('' when set by hand)
    expected_updates: float | None = None  # what the `auto` settings were chosen for (None: none auto)


def _set_up(
    task: Task[TokenizerT, DataT], config: RunConfig, run_dir: Path, resume: bool, dist: DistContext
) -> RunSetup:
    """The start-up of a run: the data prepared (or found), the model checked against the
    memory, and every setting left at `auto` chosen (`config` is changed in place)."""
    if config.train.threads:
        torch.set_num_threads(config.train.threads)
    torch.manual_seed(config.train.seed)
    tune_for_training()
    if not resume:
        split_validation(task, config, run_dir, dist)
    init = resolve_init(task, config, run_dir, resume, dist)
    data = shared_data(task, config, run_dir, resume, dist, init)
    if init is not None:
        init.check_labels(getattr(data, "labels", None))
    tokenizer = task.tokenizer(data)

    def save_tokenizer(directory: Path) -> None:
        task.save_tokenizer(tokenizer, directory)

    if dist.is_main and not resume:
        save_tokenizer(run_dir)
    def build_model() -> torch.nn.Module:
        if init is not None:
            return use_float32_attention(init.build(MODEL_CLASSES[task.model_type](), config.model.overrides))
        return use_float32_attention(task.build_model(config, data))

    auto = take_auto_settings(config)  # settings left at `auto`, chosen once the model fits
    if resume:  # the checkpoint and the config agree before anything is allocated
        check_resume_model(run_dir, build_model, str(run_dir / CONFIG_FILE))
    # A model too large for the memory is refused before any of it is allocated.
    model_settings = describe_model_settings(config)
    layout = meta_model(build_model, model_settings)
    device = rank_device(select_device(config.train.device), dist)
    check_training_fits(layout, device, model_settings)
    measured_precision = ""  # `train.precision: auto` timed along with the speed the rules need
    updates = None
    chosen = {c.name: {"value": c.value, "reason": c.reason} for c in task.data_choices(data)}  # for results
    if auto:
        profile = task.corpus_profile(data) if task.measures_corpus else None
        choice = choose_auto_settings(config, auto, build_model, data.train, task.loss, device, dist, profile)
        measured_precision = choice.precision if config.train.precision == "auto" else ""
        updates = expected_updates(choice)
        chosen |= {c.name: {"value": c.value, "reason": c.reason} for c in choice.choices}
        if "model.preset" in auto:  # the chosen size must fit as the placeholder did
            model_settings = describe_model_settings(config)
            check_training_fits(meta_model(build_model, model_settings), device, model_settings)
        torch.manual_seed(config.train.seed)  # the model starts from the same weights as with a number
    return RunSetup(data, init, build_model, save_tokenizer, chosen, measured_precision, updates)


def _train_and_report(
    task: Task[TokenizerT, DataT], config: RunConfig, run_dir: Path, resume: bool, dist: DistContext,
    start: RunStart | None = None,
) -> dict[str, Any]:
    data, init, build_model, save_tokenizer, chosen, measured_precision, updates = _set_up(
        task, config, run_dir, resume, dist
    )
    model = build_model()
    trainable, params = freeze(model, config.train.freeze)
    if init is not None:
        log.info("model: from %s, %s parameters", init.source, f"{params:,}")
    else:
        log.info("model: %s preset, %s parameters", config.model.preset, f"{params:,}")
    log.info("trainable parameters: %s of %s%s", f"{trainable:,}", f"{params:,}",
             f" (frozen: {', '.join(config.train.freeze)})" if config.train.freeze else "")
    trainer = Trainer(
        config,
        model,
        data.train,
        data.valid,
        run_dir,
        loss_fn=task.loss,
        evaluate=partial(task.validation_metrics, config=config, data=data),
        metrics=task.metrics,
        save_extra=save_tokenizer,
        dist=dist,
        command=task.command,
    )
    trainer.state.precision = measured_precision  # kept by `fit` (a resumed run's checkpoint has its own)
    initial = {}
    if init is not None and not resume and data.valid is not None and len(data.valid):
        # where fine-tuning starts: the source model's validation loss on this run's data
        loss = validation_loss(trainer.model, data.valid, config.train.batch_tokens, trainer.device, "fp32",
                               task.loss)
        log.info("validation loss of %s before training: %.4f", init.source, loss)
        initial = {"init_val_loss": loss}
    if start is not None:
        start.began = True  # from here, the run directory holds a run
    state = trainer.fit(resume=resume)
    release_free_memory()  # the training step's heap, before the final evaluation's
    results = summary(state, trainer.clock.elapsed_s(), task.target_unit) | {
        "params": params,
        "precision": trainer.precision,  # what train.precision 'auto' chose, or the one set
        "final_lr": trainer.optimizer.param_groups[0]["lr"],  # the rate of the last step
        **initial,
        "trainable_params": trainable,
        "auto_settings": chosen,
        **updates_reached(updates, state.step, dist.is_main),
        "init_from": config.train.init_from,
        "freeze": list(config.train.freeze),
        "command": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "cpu_model": cpu_model(),
        "gpu": torch.cuda.get_device_name(trainer.device) if trainer.device.type == "cuda" else None,
    }
    if dist.is_main:
        best = load_model(run_dir, device=trainer.device)
        results |= task.final_results(best, config, data, state)
        atomic_write_text(run_dir / RESULTS_FILE, json.dumps(results, indent=2) + "\n")
        write_model_card(run_dir)
    return results


def updates_reached(expected: float | None, reached: int, log_it: bool = True) -> dict[str, Any]:
    """`results.json`'s record of the updates the `auto` settings expected at start-up against
    those the run reached (empty when nothing was chosen), logged in one line."""
    if expected is None:
        return {}
    share = reached / max(expected, 1e-9)
    if log_it:
        log.info("updates: expected %s at start-up (the auto settings' estimate), reached %s (%.0f%%)",
                 f"{expected:,.0f}", f"{reached:,}", 100 * share)
    return {"expected_updates": {"expected": round(expected, 1), "reached": reached,
                                 "share": round(share, 4)}}


def split_validation(
    task: Task[TokenizerT, DataT], config: RunConfig, run_dir: Path, dist: DistContext
) -> None:
    """Rank 0 splits a validation set off the training data when the task does that
    (`Task.split_validation`); every rank then reads it from the settings rank 0 returns."""
    settings, failure = None, None
    if dist.is_main:
        try:
            settings = task.split_validation(config, run_dir)
        except AiaynError as error:
            failure = error
    shared = broadcast_object((settings, str(failure) if failure else None), dist)
    if failure is not None:
        raise failure
    if shared[1] is not None:
        raise DataError(shared[1])
    for key, value in (shared[0] or {}).items():
        setattr(config.data, key, value)


def describe_model_settings(config: RunConfig) -> str:
    """The model section as an error message names it: 'model.preset=small, model.d_model=512'."""
    settings = {"preset": config.model.preset} | config.model.overrides
    return ", ".join(f"model.{key}={value}" for key, value in settings.items())


def summary(state: TrainState, elapsed_s: float, unit: str) -> dict[str, Any]:
    """The results every task reports: steps, time (`elapsed_s` of training), throughput in
    `unit`s, the best step."""
    return {
        "steps": state.step,
        "epochs": state.epoch,
        "train_minutes": elapsed_s / 60,
        f"target_{unit}": state.target_tokens,
        f"{unit}_per_s": state.target_tokens / max(elapsed_s, 1e-9),
        "best_step": state.best_step,
        "skipped_steps": state.skipped_steps,
    }


class SessionResult(NamedTuple):
    """What `train_in_session` hands back to a CLI command."""

    results: dict[str, Any] | None  # None when SIGINT/SIGTERM stopped the run
    is_main: bool  # this process is rank 0 (it alone prints)
    run_dir: Path  # rank 0's run directory, on every rank


def train_in_session(
    task: Task[TokenizerT, DataT], config: RunConfig, run_dir: Path, *, resume: bool, overwrite: bool
) -> SessionResult:
    """`run_task` alone, or under torchrun in a process group (one timestamped default
    `run_dir` for all ranks: rank 0's)."""
    with distributed_session(config.train.device, config.train.dist_backend) as dist:
        run_dir = Path(broadcast_object(str(run_dir), dist))
        if dist.is_main:
            print(f"run directory: {run_dir}", file=sys.stderr)
        try:
            results = run_task(task, config, run_dir, resume=resume, overwrite=overwrite, dist=dist)
        except StopRequested:
            results = None
    return SessionResult(results, dist.is_main, run_dir)
