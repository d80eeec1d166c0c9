"""`train.compile`: the training step's forward, loss and backward under `torch.compile`.

What it changes against the eager step: nothing in what is computed. The task's loss function
(the model's packed forward pass and the label-smoothed loss, `aiayn.training.loss`) is traced
by TorchDynamo and its forward and backward graphs compiled (Inductor: C++ loops on a CPU,
Triton kernels on a GPU), the operators between the matmuls fused into a few generated loops.
The arithmetic is the same up to float rounding (sums in another order): proved by
`tests/training/test_compiled_step.py` (the loss and every gradient of a step equal the eager
step's within float tolerance on a tiny model). The optimizer update stays eager: Adam is
already one fused kernel for all parameters (`fused=True`, the `Trainer`'s).

Shapes: every batch has its own (B, S), (B, T) and N real tokens. The step is compiled with
`dynamic=True` from the first batch, so every dimension is a symbol and a handful of graphs
serves all batches; the packed pass ends a graph where it counts its real tokens (`nonzero`,
`aiayn.model.packing`), and N enters the next graph as a symbolic size (the packed token
dimension, dynamic). Recompilations are bounded by TorchDynamo's limit per function
(`torch._dynamo.config.recompile_limit`); past it the step runs eagerly, and PyTorch warns.
Batches keep their own lengths (no padding to a few sizes): with packing, padding costs only
in attention; the log reports the padding share of the timed batches.

`train.compile: auto` compiles only where a start-up timing says it pays over the run, and times
that only on the device types of `AUTO_TIMED_DEVICES` (a GPU; on a CPU it trains eagerly): the
eager and the compiled step are timed on the same few batches (alternating, as the precisions
are: `aiayn.training.precision`), the compile time measured, and the run compiles when the
target tokens trained in (training time - compile time) at the compiled rate beat those of the
whole training time at the eager rate by `COMPILE_MARGIN`. The training time is the time budget
left (`train.max_minutes`; a run without one is not compiled by `auto`), or `train.max_steps`
eager steps where they end the run first. A short run says no before compiling anything when
even a `BEST_SPEEDUP` could not repay `COMPILE_S_FLOOR`. Compiling
needs a C++ compiler on a CPU (`aiayn.runtime.compiled.compiler_available`).

Either way the step is compiled at start-up, on a start-up batch, before the training clock
starts (`compile_at_start`; `auto` compiles while timing): a schedule that follows the clock
would otherwise spend its warmup share compiling and take its first updates at full rate.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx.experimental._config  # the duck-sizing switch (compile_loss)
from torch import nn

from aiayn.core.errors import ConfigError
from aiayn.runtime.compiled import compiler_available
from aiayn.training.distributed import DistContext, broadcast_object
from aiayn.training.precision import (
    Timer,
    probe_batches,
    time_precisions,
    training_state_kept,
    training_step_runner,
)

log = logging.getLogger(__name__)

LossFn = Callable[..., tuple[torch.Tensor, int]]

BACKEND = "inductor"
"""TorchDynamo's backend for training (tests pass `aot_eager`, which traces the same graphs
without generating code, to keep their compile time small)."""

COMPILE_MARGIN = 0.03
"""Compiling must train this much more (3%) in the run than eager to be chosen by `auto`."""

AUTO_TIMED_DEVICES = frozenset({"cuda"})
"""The device types on which `auto` times the compiled step. On a CPU the compiled step measured
1.00x the eager one in fp32 and 1.06x in bf16 (`small`, one thread: benchmarks/RESULTS.md,
"Training on a GPU and within its budget"): the matrix products, three quarters of a CPU step,
stay the same kernels under Inductor in training, so timing it there would add a minute of
compiling to every run's start for little or nothing; `train.compile=true` still compiles."""

COMPILE_S_FLOOR, BEST_SPEEDUP = 20.0, 1.5
"""`auto` compiles nothing when `BEST_SPEEDUP` over the run could not repay `COMPILE_S_FLOOR`
seconds of compiling (a floor: no compile of a Transformer's step is cheaper), so that a short
run does not pay a compile to find that out."""


def compile_loss(loss_fn: LossFn, backend: str = BACKEND, *, device_type: str) -> LossFn:
    """`loss_fn(model, batch, smoothing)` compiled: forward and loss traced and compiled with
    every dimension dynamic; `.backward()` on its loss runs the compiled backward graph.

    On a CPU, dropout's random numbers come from PyTorch's own generator (Inductor's
    `fallback_random`), not from random numbers generated inside the fused loops: those are drawn
    one element at a time, and cost more than the fusion saves (benchmarks/RESULTS.md,
    "Training on a GPU and within its budget"). A compiled step then also draws the dropout
    masks an eager step draws from the same seed."""
    options = {"fallback_random": True} if backend == "inductor" and device_type == "cpu" else None
    compiled = torch.compile(loss_fn, dynamic=True, backend=backend, options=options)

    @functools.wraps(loss_fn)
    def step_loss(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, int]:
        # Sizes that happen to be equal in the batch traced (a source as long as its target)
        # stay separate symbols: PyTorch's "duck sizing" would make them one, and compile again
        # for every later batch where they differ.
        with torch.fx.experimental._config.patch(use_duck_shape=False):
            return compiled(*args, **kwargs)

    return step_loss


def padding_share(batches: Sequence[Any]) -> float | None:
    """Padding positions of translation batches' (B, S) sources and (B, T) targets, as a share of
    all; None for batches of another kind (a language model's, a classifier's)."""
    if not batches or not all(hasattr(b, "num_src_tokens") and hasattr(b, "labels") for b in batches):
        return None
    real = sum(int(b.num_src_tokens) + int(b.num_targets) for b in batches)
    padded = sum(b.src.numel() + b.labels.numel() for b in batches)
    return 1.0 - real / max(padded, 1)


def compile_pays(eager_rate: float, compiled_rate: float, compile_s: float, run_s: float,
                 margin: float = COMPILE_MARGIN) -> bool:
    """Whether compiling trains more target tokens in `run_s` seconds (compile time included)
    than the eager step, by `margin`."""
    return (run_s - compile_s) * compiled_rate > (1.0 + margin) * run_s * eager_rate


def check_compile(setting: str, device: torch.device) -> None:
    """`train.compile: true` where nothing can compile is an error naming the fix."""
    if setting == "true" and device.type == "cpu" and not compiler_available():
        raise ConfigError("train.compile=true: compiling on a CPU needs a C++ compiler (g++ or clang++) on "
                          "the PATH; install one or set train.compile=false")


def time_compiled_step(
    model: nn.Module, batches: Sequence[Any], loss_fn: LossFn, compiled: LossFn, label_smoothing: float,
    device: torch.device, precision: str, *, rounds: int = 3, budget_s: float = 10.0,
    timer: Timer = time.perf_counter,
) -> tuple[float, dict[str, float]]:
    """Compile `compiled` on the first batch (the seconds it took, less an eager step's: the
    compile time), then time the eager and compiled steps alternating; returns (compile seconds,
    {'eager': tokens/s, 'compiled': tokens/s}). Weights, gradients and RNG states are kept."""
    with training_state_kept(model, device):
        runners = {
            "eager": training_step_runner(model, batches, loss_fn, label_smoothing, device),
            "compiled": training_step_runner(model, batches, compiled, label_smoothing, device),
        }
        before = timer()
        runners["eager"](precision, 0)
        eager_s = timer() - before
        before = timer()
        runners["compiled"](precision, 0)
        compile_s = max(0.0, timer() - before - eager_s)

        def run_step(kind: str, round_: int) -> int:
            return runners[kind](precision, round_)

        totals = time_precisions(run_step, ["eager", "compiled"], rounds, timer=timer, budget_s=budget_s)
    return compile_s, {kind: tokens / max(seconds, 1e-12) for kind, (seconds, tokens) in totals.items()}


def choose_step_loss(
    setting: str, model: nn.Module, batches: Sequence[Any], loss_fn: LossFn, label_smoothing: float,
    device: torch.device, precision: str, time_left_s: float | None, steps_left: int | None = None, *,
    backend: str = BACKEND, timer: Timer = time.perf_counter,
) -> tuple[LossFn, str]:
    """The loss function the training steps run (`loss_fn` or its compiled form) for
    `train.compile` = `setting`, and why, logged in one line. 'auto' weighs the compile time
    against the time budget left (`time_left_s`; None: no time budget, and nothing is compiled),
    or against `steps_left` eager steps (one timed on `batches`) where those end the run first."""
    check_compile(setting, device)
    if setting == "false":
        return loss_fn, "train.compile=false"
    padding = padding_share(batches)
    share = "" if padding is None else f"padding {100 * padding:.0f}% of the timed batches' positions"
    if setting == "true":
        compiled = compile_loss(loss_fn, backend, device_type=device.type)
        reason = "train.compile=true"
        if batches:
            compile_s = compile_at_start(model, batches, compiled, label_smoothing, device, precision, timer)
            reason += f", compiled in {compile_s:.0f} s at start-up"
        reason += f" ({share})" if share else ""
        log.info("training step compiled: %s", reason)
        return compiled, reason
    run_s = time_left_s
    reason = _not_worth_timing(device, run_s, batches)
    if not reason and steps_left is not None:  # which budget ends the run first: an eager step timed
        step_s = eager_step_seconds(model, batches, loss_fn, label_smoothing, device, precision, timer)
        run_s = min(run_s or 0.0, steps_left * step_s)
        reason = _not_worth_timing(device, run_s, batches)
    if reason:
        log.info("train.compile auto: eager, %s", reason)
        return loss_fn, reason
    assert run_s is not None
    compiled = compile_loss(loss_fn, backend, device_type=device.type)
    try:
        compile_s, rates = time_compiled_step(model, batches, loss_fn, compiled, label_smoothing, device,
                                              precision, timer=timer)
    except Exception as error:  # a compiler's failure: 'auto' trains eagerly instead
        reason = f"compiling failed ({type(error).__name__}: {str(error).splitlines()[0][:200]})"
        log.warning("train.compile auto: eager, %s", reason)
        return loss_fn, reason
    pays = compile_pays(rates["eager"], rates["compiled"], compile_s, run_s)
    reason = (f"eager {rates['eager']:,.0f}, compiled {rates['compiled']:,.0f} target tokens/s after "
              f"{compile_s:.0f} s compiling, over {run_s / 60:.1f} minutes of training")
    reason += f"; {share}" if share else ""
    log.info("train.compile auto: %s, %s", "compiled" if pays else "eager", reason)
    return (compiled if pays else loss_fn), reason


def compile_at_start(
    model: nn.Module, batches: Sequence[Any], compiled: LossFn, label_smoothing: float, device: torch.device,
    precision: str, timer: Timer = time.perf_counter,
) -> float:
    """Compile `compiled` by one step on the first of `batches` (weights, gradients and RNG states
    kept); returns the seconds it took. Compiling here, before the training clock starts (it
    starts at the first step: `aiayn.training.clock`), keeps it out of a time-following
    schedule: a warmup given as a share of the run would otherwise be spent compiling, and the
    first updates taken at the full learning rate."""
    with training_state_kept(model, device):
        runner = training_step_runner(model, batches, compiled, label_smoothing, device)
        before = timer()
        runner(precision, 0)
        return timer() - before


def eager_step_seconds(
    model: nn.Module, batches: Sequence[Any], loss_fn: LossFn, label_smoothing: float, device: torch.device,
    precision: str, timer: Timer = time.perf_counter,
) -> float:
    """Seconds of one eager training step, on the second of `batches` (after one untimed)."""
    with training_state_kept(model, device):
        runner = training_step_runner(model, batches, loss_fn, label_smoothing, device)
        runner(precision, 0)
        before = timer()
        runner(precision, 1)
        return timer() - before


def _not_worth_timing(device: torch.device, run_s: float | None, batches: Sequence[Any]) -> str:
    """Why `auto` need not time the compiled step at all ('' when it should)."""
    if not batches:
        return "no training batches to time"
    if device.type not in AUTO_TIMED_DEVICES:
        return (f"on a {device.type.upper()} the compiled step measured no faster than eager "
                "(benchmarks/RESULTS.md); train.compile=true compiles")
    if device.type == "cpu" and not compiler_available():
        return "no C++ compiler to compile with"
    if run_s is None:
        return "no time budget (train.max_minutes) to weigh compiling against; train.compile=true compiles"
    if not compile_pays(1.0, BEST_SPEEDUP, COMPILE_S_FLOOR, run_s):
        return f"{run_s / 60:.1f} minutes of training are too few to repay compiling"
    return ""


def step_loss_for_run(
    setting: str, model: nn.Module, train_data: Any, loss_fn: LossFn, cfg: Any, device: torch.device,
    precision: str, time_left_s: float | None, steps_left: int | None, dist: DistContext,
) -> LossFn:
    """`choose_step_loss` at the start of `Trainer.fit`: timed on a few training batches of
    `cfg.batch_tokens` (`cfg`: the `train` section) with the raw model (no collective calls: the
    ranks may time different numbers of rounds); rank 0's decision is every rank's."""
    # 'true' draws them too, for the padding share it reports
    wanted = setting != "false" and train_data is not None
    batches = probe_batches(train_data, cfg.batch_tokens, cfg.seed) if wanted else []
    chosen, _ = choose_step_loss(setting, model, batches, loss_fn, cfg.label_smoothing, device, precision,
                                 time_left_s, steps_left)
    if not broadcast_object(chosen is not loss_fn, dist):
        return loss_fn
    if chosen is not loss_fn:
        return chosen
    compiled = compile_loss(loss_fn, device_type=device.type)  # rank 0 chose it: compiled here too,
    if batches:  # before the clock, as rank 0's was
        compile_at_start(model, batches, compiled, cfg.label_smoothing, device, precision)
    return compiled
