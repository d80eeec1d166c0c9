"""The training loop: batches -> loss -> Adam with warmup -> checkpoints.

One optimisation step (Sec. 5): the token-budget batches of one step (several with gradient
accumulation) go through the model; the summed (label-smoothed) loss is divided by the number
of predictions of the whole step; gradients are clipped; Adam (beta1 0.9, beta2 0.98,
eps 1e-9, Sec. 5.3) updates the weights at the scheduled learning rate. Every `eval_every`
steps (or share of the run, '6%': `aiayn.training.progress`) the validation loss and the task's
own metrics (BLEU, accuracy, ...) are measured, the best model by `train.validation_metric` is
written to the run directory's root and a checkpoint is saved; each checkpoint records the
clock and the run's progress (which `average_checkpoints(tail=...)` selects by). The
validations together may take `train.bleu_time_share` of the training time: each gives its
`evaluate` the seconds left of that share (`aiayn.training.clock.validation_allowance`), and a
task that decodes stops decoding there (`aiayn.translation.validation`).

The Trainer knows no task: its data is any `BatchedDataset` (`aiayn.data.batching`), its loss
a `LossFn` over its batches, and whether a metric is better higher or lower is the
`Metric`'s to say.

Under torchrun (a `DistContext` from `aiayn.training.distributed`), each rank trains on its
own share of the batches through a DDP-wrapped model; the step's loss is normalised by the
predictions of all ranks, so the update is that of one process on the union batch. Rank 0
alone validates and writes; its stop decisions are broadcast to every rank.

Training time is the `TrainClock`'s (`aiayn.training.clock`): it runs from the first step
(after the start-up precision timing) to the end of `fit`, continues from the time a
checkpoint recorded on resume, and is written into every checkpoint. Once per step the loop
takes rank 0's reading and stop decision to every rank in one all-reduce (`_shared_reading`),
so a time-following schedule uses rank 0's clock everywhere (see `aiayn.training.schedule`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from types import FrameType
from typing import Any, Generic

import torch
from torch import nn

from aiayn import formats
from aiayn.core.errors import TrainingError
from aiayn.core.files import atomic_write_text
from aiayn.core.progress_display import ProgressDisplay
from aiayn.data.batching import BatchedDataset
from aiayn.formats.model_card import write_model_card
from aiayn.training.checkpoint import load_training_state, restore_weights, save_checkpoint
from aiayn.training.clock import Timer, TrainClock, validation_allowance
from aiayn.training.compiled_step import step_loss_for_run
from aiayn.training.config import RunConfig
from aiayn.training.device import autocast, resolve_precision, select_device
from aiayn.training.distributed import (
    DistContext,
    all_gather_object,
    all_reduce_max,
    all_reduce_sum,
    barrier,
    convert_position,
    newest_checkpoint,
    no_sync,
    rank_device,
    restore_rng,
    rng_state,
    wrap_model,
)
from aiayn.training.loss import validation_loss
from aiayn.training.precision import (
    attention_context,
    check_precision,
    choose_precision,
    grad_scaler,
    precision_context,
)
from aiayn.training.progress import Cadence, run_progress
from aiayn.training.run_dir import CONFIG_FILE, MetricsLog
from aiayn.training.schedule import train_learning_rate
from aiayn.training.state import StopRequested, TrainState, out_of_budget
from aiayn.training.task import BatchT, Evaluate, LossFn, Metric, SaveExtra, find_metric
from aiayn.training.trackers import open_trackers

log = logging.getLogger(__name__)


__all__ = ["StopRequested", "TrainState", "Trainer"]


class Trainer(Generic[BatchT]):
    """Trains a model on prepared data into a run directory (see `aiayn.training.checkpoint`).

    Args:
        config: the resolved run configuration (`self.config`; the loop reads `config.train`).
        model: the model to train (`save_pretrained` and a `config.d_model` are all it needs
            besides its forward pass, which only `loss_fn` calls).
        train_data: the training set.
        valid_data: the validation set (or None).
        run_dir: where the best model, checkpoints and metrics go.
        loss_fn: how a batch becomes a summed loss and its number of predictions.
        evaluate: validation metrics besides the loss (e.g. BLEU), at every validation.
        metrics: the metrics `evaluate` reports, with their direction; `train.validation_metric`
            must name one of them or `loss`/`ppl`.
        save_extra: writes the files that belong with every saved model (e.g. the tokenizer).
        dist: this process's place under torchrun (see `aiayn.training.distributed`); None
            for a single process. Rank 0 alone writes. `self.model` stays the raw model;
            forward passes of training go through `self.ddp_model` (the DDP wrapper when
            distributed).
        command: the CLI command that resumes this run, for the message after an interrupt.
        timer: the clock's time source (`time.perf_counter`; tests pass a fake one).
    """

    def __init__(
        self,
        config: RunConfig,
        model: nn.Module,
        train_data: BatchedDataset[BatchT] | None,
        valid_data: BatchedDataset[BatchT] | None,
        run_dir: Path,
        *,
        loss_fn: LossFn[BatchT],
        evaluate: Evaluate | None = None,
        metrics: Sequence[Metric] = (),
        save_extra: SaveExtra | None = None,
        dist: DistContext | None = None,
        command: str = "aiayn train",
        timer: Timer | None = None,
    ) -> None:
        self.config = config
        train = config.train
        self.selection = find_metric(train.validation_metric, tuple(metrics))
        self.run_dir = Path(run_dir)
        self.dist = dist or DistContext()
        self.device = rank_device(select_device(train.device), self.dist)
        check_precision(train.precision, self.device)
        self.precision = resolve_precision(train.precision, self.device)
        self.model = model.to(self.device)
        self.train_data = train_data
        self.valid_data = valid_data
        self.loss_fn = loss_fn
        self.step_loss = loss_fn  # what training steps run: `fit` may compile it (train.compile)
        self.evaluate = evaluate
        self.save_extra = save_extra
        self.is_main = self.dist.is_main
        self.ddp_model = wrap_model(self.model, self.device, self.dist)
        if self.dist.world_size > 1:
            torch.manual_seed(train.seed + self.dist.rank)  # different dropout on each rank
        self.state = TrainState(world_size=self.dist.world_size)
        self.last_step_tokens = 0
        budget_s = 60 * train.max_minutes if train.max_minutes is not None else None
        self.clock = TrainClock(budget_s) if timer is None else TrainClock(budget_s, timer)
        self.cadence = Cadence(train.eval_every)
        self.validated_step: int | None = None  # the step of this session's last validation
        self.optimizer = torch.optim.Adam(
            [p for p in self.model.parameters() if p.requires_grad],  # frozen ones: no state (train.freeze)
            lr=0.0,
            betas=(train.adam_beta1, train.adam_beta2),
            eps=train.adam_eps,
            weight_decay=train.weight_decay,
            fused=self.device.type in ("cpu", "cuda"),  # one kernel for all parameters
        )
        self.scaler = grad_scaler(self.precision, self.device)  # set again once `fit` chooses
        self.scaler_state: dict[str, Any] | None = None
        self.command = command
        self.stop_signal: int | None = None
        self.consecutive_bad_steps = 0
        self.metrics: MetricsLog | None = None

    # -------------------------------------------------------------- resume
    def resume(self) -> bool:
        """Load the newest complete checkpoint, if any; return whether one was found."""
        latest = newest_checkpoint(self.run_dir, self.dist)  # rank 0's choice, on every rank
        if latest is None:  # stopped before its first checkpoint: nothing learnt is lost
            log.info("no checkpoint in %s yet: training starts from step 0", self.run_dir)
            return False
        state = load_training_state(latest)
        restore_weights(self.model, latest)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler_state = state.get("grad_scaler")  # fp16's loss scale, loaded once `fit` makes the scaler
        train_state = dict(state["train_state"])
        earlier_elapsed = train_state.pop("elapsed_s", 0.0)  # where checkpoints before the clock kept it
        self.clock.load_state_dict(state.get("clock", {"elapsed_s": earlier_elapsed}))
        self.state = TrainState(**train_state)
        restore_rng(state, self.dist, seed=self.config.train.seed + self.dist.world_size * self.state.step)
        if self.state.world_size != self.dist.world_size:
            log.warning(
                "checkpoint written by %d process(es), resuming with %d: data position converted",
                self.state.world_size,
                self.dist.world_size,
            )
            self.state.batch_in_epoch = convert_position(
                self.state.batch_in_epoch, self.state.world_size, self.dist.world_size
            )
            self.state.world_size = self.dist.world_size
        log.info("resumed from %s (step %d, epoch %d)", latest, self.state.step, self.state.epoch)
        return True

    def _checkpoint_state(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer.state_dict(),
            "train_state": asdict(self.state),
            "clock": self.clock.state_dict(),
            "progress": self.progress(self.clock.elapsed_s()),
            **({"grad_scaler": self.scaler.state_dict()} if self.scaler is not None else {}),
            **rng_state(),
        }

    def save_checkpoint(self) -> Path | None:
        """Write a checkpoint (rank 0); under torchrun every rank must call it (RNG states are
        gathered from all ranks)."""
        rng_ranks = all_gather_object(rng_state(), self.dist)
        if not self.is_main:
            return None
        state = self._checkpoint_state()
        if self.dist.world_size > 1:
            state["rng_ranks"] = rng_ranks
        keep = self.config.train.keep_checkpoints
        path = save_checkpoint(self.run_dir, self.state.step, self.model, state, keep)
        if self.save_extra is not None:
            self.save_extra(path)
        return path

    # -------------------------------------------------------------- data
    def _batches(self) -> Iterator[BatchT]:
        """Training batches from the saved data position on, epoch after epoch."""
        # Under torchrun each rank reads its share (equal counts, or the ranks would desync).
        if self.train_data is None:
            raise TrainingError("this Trainer was built without training data")
        train = self.config.train
        while train.max_epochs is None or self.state.epoch < train.max_epochs:
            from_start = self.state.batch_in_epoch == 0
            for batch in self.train_data.batches(
                train.batch_tokens,
                shuffle=True,
                seed=train.seed,
                epoch=self.state.epoch,
                start=self.state.batch_in_epoch,
                rank=self.dist.rank,
                world_size=self.dist.world_size,
            ):
                self.state.batch_in_epoch += 1
                yield batch
            if from_start and self.state.batch_in_epoch == 0:
                raise TrainingError(
                    f"no training batches for rank {self.dist.rank} of {self.dist.world_size}: the "
                    "training set must give at least one batch of train.batch_tokens per process"
                )
            self.state.epoch += 1
            self.state.batch_in_epoch = 0

    # -------------------------------------------------------------- one step
    def learning_rate(self, step: int, elapsed_s: float) -> float:
        """The rate for 1-based `step`, `elapsed_s` seconds of training in."""
        d_model = self.model.config.d_model
        return train_learning_rate(self.config.train, d_model, step, elapsed_s)

    def accumulate_gradients(self, batches: list[BatchT]) -> tuple[float, int]:
        """Forward and backward passes over this rank's micro-batches of one step.

        The summed loss is divided by the step's predictions (`num_targets`) over all ranks,
        times the world size (DDP averages gradients over ranks), so the gradients are those of
        one process on the union of every rank's batches. Gradients are all-reduced only in the
        backward pass of the last micro-batch (`no_sync` before). Returns (loss sum,
        predictions), both summed over all ranks.
        """
        self.ddp_model.train()
        local_tokens = sum(b.num_targets for b in batches)
        (global_tokens,) = all_reduce_sum([local_tokens], self.dist, self.device)
        divisor = global_tokens / self.dist.world_size  # == local_tokens for one process
        total = 0.0
        for i, batch in enumerate(batches):
            batch = batch.to(self.device, non_blocking=True)
            with no_sync(self.ddp_model, skip=i < len(batches) - 1):
                with autocast(self.precision, self.device):
                    loss, _ = self.step_loss(self.ddp_model, batch, self.config.train.label_smoothing)
                scaled = loss / divisor
                (scaled if self.scaler is None else self.scaler.scale(scaled)).backward()
            total += float(loss.detach())
        (total,) = all_reduce_sum([total], self.dist, self.device)
        return total, round(global_tokens)

    def train_step(self, batches: list[BatchT], elapsed_s: float | None = None) -> float | None:
        """One optimizer update over `batches` (this rank's share), at the learning rate of
        `elapsed_s` seconds of training (default: this process's clock now); returns the loss per
        prediction (over all ranks), or None when the step was skipped because the loss or the
        gradients were not finite (the same decision on every rank)."""
        total, num_tokens = self.accumulate_gradients(batches)
        self.last_step_tokens = num_tokens
        elapsed = self.clock.elapsed_s() if elapsed_s is None else elapsed_s
        lr = self.learning_rate(self.state.step + 1, elapsed)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        max_norm = self.config.train.clip_grad_norm or float("inf")
        if self.scaler is not None:  # fp16: the clip and the update see the true gradients
            self.scaler.unscale_(self.optimizer)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm))
        if self.scaler is not None and math.isfinite(total) and not math.isfinite(grad_norm):
            self.scaler.update()  # fp16 overflow: a lower scale next step, as GradScaler does
            self.optimizer.zero_grad(set_to_none=True)
            log.info("step %d: fp16 gradients overflowed; skipped, loss scale now %g", self.state.step + 1,
                     self.scaler.get_scale())
            return None
        if not (math.isfinite(total) and math.isfinite(grad_norm)):
            self.optimizer.zero_grad(set_to_none=True)
            self.state.skipped_steps += 1
            self.consecutive_bad_steps += 1
            log.warning(
                "step %d: non-finite %s; step skipped (%d skipped so far, %d in a row)",
                self.state.step + 1,
                "loss" if not math.isfinite(total) else "gradient norm",
                self.state.skipped_steps,
                self.consecutive_bad_steps,
            )
            if self.consecutive_bad_steps >= self.config.train.max_bad_steps:
                raise TrainingError(
                    f"{self.consecutive_bad_steps} consecutive steps had a non-finite loss or "
                    f"gradient (train.max_bad_steps={self.config.train.max_bad_steps}); lower the learning "
                    "rate or check the data"
                )
            return None
        self.consecutive_bad_steps = 0
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.state.step += 1
        self.state.target_tokens += num_tokens
        return total / num_tokens

    # -------------------------------------------------------------- validation
    def validate(self, started: float | None = None) -> dict[str, float]:
        """Validation loss/perplexity (+ `evaluate`'s metrics, within the validations' time cap
        for a validation `started` at that `clock.timer()` reading); updates the best model."""
        started = self.clock.timer() if started is None else started
        record: dict[str, float] = {}
        if self.valid_data is not None and len(self.valid_data):
            loss = validation_loss(
                self.model,
                self.valid_data,
                self.config.train.batch_tokens,
                self.device,
                self.precision,
                self.loss_fn,
            )
            record = {"loss": loss, "ppl": math.exp(min(loss, 50.0))}
        if self.evaluate is not None:
            share = self.config.train.bleu_time_share
            allowance = None if share is None else validation_allowance(
                share, self.clock.elapsed_s(), self.state.validation_s, self.clock.timer() - started)
            record |= self.evaluate(self.model, allowance_s=allowance)
        value = record.get(self.selection.name)
        if value is None:
            self.save_best()  # nothing to compare: the latest model is the one to keep
        elif self.selection.improves(value, self.state.best_metric):
            self.state.best_metric, self.state.best_step = value, self.state.step
            self.state.evals_without_improvement = 0
            self.save_best()
        else:
            self.state.evals_without_improvement += 1
        return record

    def save_best(self) -> None:
        if self.is_main:
            formats.save_pretrained(self.model, self.run_dir)
            if self.save_extra is not None:
                self.save_extra(self.run_dir)
            write_model_card(self.run_dir)  # complete at the end (results.json), current meanwhile

    # -------------------------------------------------------------- the loop
    def progress(self, elapsed_s: float) -> float | None:
        """The run's progress at the current step, `elapsed_s` seconds in (`run_progress`)."""
        max_steps = self.config.train.max_steps
        return run_progress(self.state.step, elapsed_s, max_steps=max_steps, budget_s=self.clock.budget_s)

    def stop_reason(self, elapsed_s: float) -> str | None:
        """Why training must stop `elapsed_s` seconds in (a budget is spent), or None."""
        return out_of_budget(self.config.train, self.state, elapsed_s)

    def _shared_reading(self) -> tuple[float, str | None]:
        """Rank 0's training time and stop decision, on every rank (clocks differ between ranks,
        and only rank 0 validates, so only it knows about early stopping); one all-reduce."""
        elapsed = self.clock.elapsed_s()
        reason = self.stop_reason(elapsed) if self.dist.is_main else None
        if self.dist.enabled:  # a sum over rank 0's values and zeros: rank 0's values everywhere
            mine = [float(reason is not None), elapsed] if self.dist.is_main else [0.0, 0.0]
            stop, elapsed = all_reduce_sum(mine, self.dist, self.device)
            reason = reason or ("stopped by rank 0" if stop else None)
        return elapsed, reason

    def _stop_requested(self) -> bool:
        """A stop signal arrived (under torchrun: on any rank; then all ranks stop here)."""
        if self.dist.enabled:
            (signum,) = all_reduce_max([self.stop_signal or 0], self.dist, self.device)
            self.stop_signal = signum or None
        return self.stop_signal is not None

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.stop_signal = signum

    def fit(self, resume: bool = False) -> TrainState:
        """Train until a budget runs out; returns the final state."""
        train = self.config.train
        if resume:
            self.resume()
        self.precision = self.state.precision = choose_precision(
            train, self.state.precision, self.model, self.train_data, self.loss_fn, self.device, self.dist
        )
        self.scaler = grad_scaler(self.precision, self.device)
        if self.scaler is not None and self.scaler_state:
            self.scaler.load_state_dict(self.scaler_state)
        budget_s = self.clock.budget_s
        self.step_loss = step_loss_for_run(
            train.compile, self.model, self.train_data, self.loss_fn, train, self.device, self.precision,
            None if budget_s is None else max(0.0, budget_s - self.clock.elapsed_s()),
            None if train.max_steps is None else max(0, train.max_steps - self.state.step), self.dist,
        )
        trackers = []
        if self.is_main:
            trackers = open_trackers(train.report_to, self.run_dir, self.config.to_dict(), resume)
        self.metrics = MetricsLog(
            self.run_dir, self.state.step if resume else None, enabled=self.is_main, trackers=trackers
        )
        if self.is_main:
            atomic_write_text(self.run_dir / CONFIG_FILE, self.config.to_yaml())
        log.info(
            "effective batch: %d process(es) x %d micro-batch(es) of up to %d tokens "
            "(train.batch_tokens) = up to %d padded tokens per step",
            self.dist.world_size,
            train.accumulate,
            train.batch_tokens,
            self.dist.world_size * train.accumulate * train.batch_tokens,
        )
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        run_context = contextlib.ExitStack()  # the precision's and the attention kernels' settings
        run_context.enter_context(precision_context(self.precision, self.device))
        run_context.enter_context(attention_context(self.device))
        bar = self.open_progress()
        self.cadence.start(self.progress(self.clock.elapsed_s()))  # the checkpoint's time, on every rank
        self.clock.start()
        window_tokens, window_start, last_loss = 0, self.clock.timer(), None
        batches = self._batches()
        try:
            while True:
                elapsed, reason = self._shared_reading()
                if reason is not None:
                    break
                group = [b for _, b in zip(range(train.accumulate), batches, strict=False)]
                if not group:
                    reason = f"reached train.max_epochs={train.max_epochs}"
                    break
                loss = self.train_step(group, elapsed)
                if loss is None:
                    continue
                self._show_progress(bar)
                window_tokens += self.last_step_tokens  # over all ranks
                step, last_loss = self.state.step, loss
                if step % train.log_every == 0 or step == 1:
                    self._log_train(loss, window_tokens, window_start, bar)
                    window_tokens, window_start, last_loss = 0, self.clock.timer(), None
                if self.cadence.due(step, self.progress(elapsed)):  # rank 0's time: the same on all ranks
                    self.cadence.passed(self.progress(elapsed))
                    self._validate_and_save()
                if self._stop_requested():
                    raise StopRequested
            if last_loss is not None:  # the last step had no row yet: log its (final) learning rate
                self._log_train(last_loss, window_tokens, window_start, bar)
            if self.cadence.due_at_end(self.state.step, self.validated_step):
                self._validate_and_save()
            log.info("training stopped: %s", reason)
        except StopRequested:
            path = self.save_checkpoint()
            barrier(self.dist)  # no rank exits while rank 0 writes
            name = signal.Signals(self.stop_signal).name
            if self.is_main:
                log.warning("%s received: checkpoint written to %s", name, path)
                print(
                    f"\nInterrupted by {name} at step {self.state.step}. Resume with:\n"
                    f"  {self.command} --resume {self.run_dir}",
                    flush=True,
                )
            raise
        finally:
            self.clock.stop()
            run_context.close()
            bar.close()
            self.metrics.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return self.state

    def open_progress(self) -> ProgressDisplay:
        """The progress display on stderr (`train.progress`; rank 0 only). Its total is the
        run's budget: the time budget in seconds where the run has one (a step-bound run then
        shows its steps' share of it), else its steps; the position is `run_progress` of it."""
        train = self.config.train
        budget_s = self.clock.budget_s
        total = budget_s if budget_s is not None else train.max_steps
        return ProgressDisplay(
            train.progress if self.is_main else "none", total, "s" if budget_s is not None else "step",
            "train", interval_s=train.progress_every_s, initial=self._progress_position(total),
            timer=self.clock.timer,
        )

    def _progress_position(self, total: float | None) -> float:
        """Where the display stands: the run's progress times its total (the step without one)."""
        progress = self.progress(self.clock.elapsed_s())
        return self.state.step if total is None or progress is None else progress * total

    def _show_progress(self, bar: ProgressDisplay, fields: dict[str, str] | None = None) -> None:
        """Move the display to this step (with new `fields`: loss, lr, tok/s; else the last ones)."""
        max_steps = self.config.train.max_steps
        step = f"{self.state.step:,}" + (f"/{max_steps:,}" if max_steps else "")
        kept = {k: v for k, v in bar.fields.items() if k != "step"} if fields is None else fields
        shown = {"step": step, **kept}
        elapsed = self.clock.elapsed_s()
        budget_s = self.clock.budget_s
        steps_bind = max_steps and (budget_s is None or self.state.step / max_steps >= elapsed / budget_s)
        of = f"{max_steps:,} steps" if steps_bind else None
        bar.update(self._progress_position(bar.total), shown, elapsed_s=elapsed, of=of)

    def _log_train(self, loss: float, window_tokens: int, window_start: float, bar: ProgressDisplay) -> None:
        """One `train` row of metrics.jsonl for the step just taken."""
        now = self.clock.timer()
        tokens_per_s = window_tokens / max(now - window_start, 1e-9)
        lr = self.optimizer.param_groups[0]["lr"]
        self._show_progress(bar, {"loss": f"{loss:.3f}", "lr": f"{lr:.2e}", "tok/s": f"{tokens_per_s:,.0f}"})
        self.metrics.write({
            "step": self.state.step, "split": "train", "loss": loss, "lr": lr, "epoch": self.state.epoch,
            "tokens_per_s": tokens_per_s, "step_tgt_tokens": self.last_step_tokens,
            "elapsed_s": self.clock.elapsed_s(),
        })

    def _validate_and_save(self) -> None:
        """Validate (rank 0 only; the others wait) and save a checkpoint."""
        self.validated_step = self.state.step
        if self.dist.is_main:
            before = self.clock.timer()
            record = self.validate(before)
            self.state.validation_s += self.clock.timer() - before
            self.metrics.write({
                "step": self.state.step, "split": "val", **record,
                "elapsed_s": self.clock.elapsed_s(),
                "validation_s": self.clock.timer() - before,
            })
            shown = ", ".join(f"{k} {v:.4g}" for k, v in record.items())
            log.info("step %d: validation %s", self.state.step, shown)
        self.save_checkpoint()
        barrier(self.dist)
