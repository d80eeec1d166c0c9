"""`train.precision: auto`: fp32 or bf16, whichever trains faster here, by measurement.

Whether bf16 autocast pays off depends on the CPU or GPU, the model's width and the batch
shapes, so no flag list predicts it (an AVX-512 BF16 CPU can run bf16 matmuls at half the
fp32 rate). At start-up, `measure_precision` times the model's own training step (forward and
backward over a few real training batches, no optimizer update) in each candidate precision,
alternating, logs both rates and returns the faster. bf16 must win by `margin` (default 5%):
it rounds more, so a tie goes to fp32. The timing leaves the weights, the gradients and the
random number generators as it found them, so training continues exactly as it would have
with that precision set by hand.

The precision also decides how attention runs: `float32_attention`, which every training model
holds (`use_float32_attention`), computes Eq. 1 in float32 inside a CPU bf16 autocast.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from aiayn.model.attention import scaled_dot_product_attention
from aiayn.model.multi_head_attention import MultiHeadAttention
from aiayn.training.config import TrainConfig
from aiayn.training.device import autocast, bf16_worth_measuring
from aiayn.training.distributed import DistContext, broadcast_object

log = logging.getLogger(__name__)

Timer = Callable[[], float]
"""A clock in seconds, `time.perf_counter` unless a test passes a fake one."""


def float32_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout: float = 0.0,
    need_weights: bool = False,
    is_causal: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The model's `scaled_dot_product_attention` (same arguments and result), its fused path
    computed in float32 on bf16 CPU inputs or inside a CPU bf16 autocast: there torch's bf16
    flash-attention backward is far slower than its fp32 one (benchmarks/RESULTS.md), and
    attention is a small part of the FLOPs. Anywhere else it is the model's own call."""
    on_cpu_bf16 = (
        not need_weights
        and query.device.type == "cpu"
        and (query.dtype == torch.bfloat16 or torch.is_autocast_enabled("cpu"))
    )
    if not on_cpu_bf16:
        return scaled_dot_product_attention(query, key, value, mask, dropout, need_weights, is_causal)
    with torch.autocast("cpu", enabled=False):
        output, _ = scaled_dot_product_attention(
            query.float(), key.float(), value.float(), mask, dropout, False, is_causal
        )
    return output.to(query.dtype), None


def use_float32_attention(model: nn.Module) -> nn.Module:
    """Give every multi-head attention layer of a model to be trained `float32_attention`
    (as its `attention`); returns the model."""
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.attention = float32_attention
    return model


def time_precisions(
    run_step: Callable[[str, int], int],
    precisions: Sequence[str],
    rounds: int,
    timer: Timer = time.perf_counter,
    budget_s: float = 10.0,
) -> dict[str, tuple[float, int]]:
    """Seconds and target tokens of `run_step(precision, round)` summed over timed rounds.

    Round 0 runs every precision once untimed (first-call costs: kernel choice, allocation).
    Rounds 1..`rounds` run every precision on the same round's batch, the order alternating
    from round to round so that drift in the machine's load falls on both; the rounds stop
    early once `budget_s` seconds have been spent (after at least one timed round).
    `run_step` returns the number of target tokens it trained on.
    """
    for precision in precisions:
        run_step(precision, 0)
    totals = {precision: (0.0, 0) for precision in precisions}
    started = timer()
    for round_ in range(1, rounds + 1):
        order = precisions if round_ % 2 else list(reversed(precisions))
        for precision in order:
            before = timer()
            tokens = run_step(precision, round_)
            seconds, counted = totals[precision]
            totals[precision] = (seconds + timer() - before, counted + tokens)
        if timer() - started >= budget_s:
            break
    return totals


def pick_fastest(totals: dict[str, tuple[float, int]], margin: float = 0.05) -> str:
    """'bf16' when its tokens per second beat fp32's by more than `margin`, else 'fp32'."""
    rates = {precision: tokens / max(seconds, 1e-12) for precision, (seconds, tokens) in totals.items()}
    if "bf16" in rates and rates["bf16"] > (1.0 + margin) * rates.get("fp32", 0.0):
        return "bf16"
    return "fp32"


def training_step_runner(
    model: nn.Module,
    batches: Sequence[Any],
    loss_fn: Callable[..., tuple[torch.Tensor, int]],
    label_smoothing: float,
    device: torch.device,
) -> Callable[[str, int], int]:
    """`run_step(precision, round)`: forward and backward over `batches[round % len]`, no update."""
    on_device = [batch.to(device) for batch in batches]

    def run_step(precision: str, round_: int) -> int:
        batch = on_device[round_ % len(on_device)]
        with autocast(precision, device):
            loss, num_tokens = loss_fn(model, batch, label_smoothing)
        loss.backward()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        model.zero_grad(set_to_none=True)
        return int(num_tokens)

    return run_step


def measure_training_steps(
    model: nn.Module,
    batches: Sequence[Any],
    loss_fn: Callable[..., tuple[torch.Tensor, int]],
    label_smoothing: float,
    device: torch.device,
    precisions: Sequence[str],
    *,
    rounds: int = 3,
    budget_s: float = 5.0,
    timer: Timer = time.perf_counter,
) -> dict[str, tuple[float, int]]:
    """`time_precisions` of the model's training step over `batches` in each of `precisions`;
    weights, gradients (left as None) and RNG states are unchanged afterwards."""
    was_training = model.training
    model.train()
    rng_devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=rng_devices):  # dropout here must not shift training's draws
        runner = training_step_runner(model, batches, loss_fn, label_smoothing, device)
        totals = time_precisions(runner, list(precisions), rounds, timer=timer, budget_s=budget_s)
    model.train(was_training)
    return totals


def measure_precision(
    model: nn.Module,
    batches: Sequence[Any],
    loss_fn: Callable[..., tuple[torch.Tensor, int]],
    label_smoothing: float,
    device: torch.device,
    *,
    rounds: int = 3,
    budget_s: float = 5.0,
    timer: Timer = time.perf_counter,
) -> str:
    """'fp32' or 'bf16' for training `model` on `device`, measured (see the module docstring).

    `batches` are a few real training batches (round r trains on `batches[r % len]`). Devices
    without bf16 autocast, and CPUs without bf16 instructions, get 'fp32' unmeasured.
    Weights, gradients (left as None) and RNG states are unchanged afterwards.
    """
    if not batches or not bf16_worth_measuring(device):
        log.info("train.precision auto: fp32 (no bf16 instructions on %s to measure)", device.type)
        return "fp32"
    started = time.perf_counter()
    totals = measure_training_steps(
        model, batches, loss_fn, label_smoothing, device, ["fp32", "bf16"],
        rounds=rounds, budget_s=budget_s, timer=timer,
    )
    choice = pick_fastest(totals)
    rates = {p: tokens / max(seconds, 1e-12) for p, (seconds, tokens) in totals.items()}
    log.info(
        "train.precision auto: fp32 %s target tokens/s, bf16 %s target tokens/s "
        "(training steps timed on this machine, %.1f s); using %s",
        f"{rates['fp32']:,.0f}",
        f"{rates['bf16']:,.0f}",
        time.perf_counter() - started,
        choice,
    )
    return choice


def probe_batches(dataset: Any, batch_tokens: int, seed: int, count: int = 4) -> list[Any]:
    """The first `count` batches of a shuffled epoch (a fixed epoch, so every rank and every
    resume draws the same ones); the training loop's own data position is untouched."""
    batches = []
    for batch in dataset.batches(batch_tokens, shuffle=True, seed=seed, epoch=0):
        batches.append(batch)
        if len(batches) == count:
            break
    return batches


def choose_precision(
    cfg: TrainConfig,
    recorded: str,
    model: nn.Module,
    train_data: Any,
    loss_fn: Callable[..., tuple[torch.Tensor, int]],
    device: torch.device,
    dist: DistContext,
) -> str:
    """The precision a run trains in: `cfg.precision` when it is 'fp32' or 'bf16'; for 'auto',
    the choice `recorded` in a resumed run's state, else measured now. Under torchrun every rank
    measures (the machine as loaded by all of them) and rank 0's choice is used by all."""
    if cfg.precision != "auto":
        return cfg.precision
    if recorded:
        log.info("train.precision auto: %s, as measured when this run started", recorded)
        return recorded
    batches = probe_batches(train_data, cfg.batch_tokens, cfg.seed) if train_data is not None else []
    choice = measure_precision(model, batches, loss_fn, cfg.label_smoothing, device)
    return broadcast_object(choice, dist)
