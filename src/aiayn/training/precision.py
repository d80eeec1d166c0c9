"""`train.precision: auto`: fp32 or bf16, whichever trains faster here, by measurement.

Whether bf16 autocast pays off depends on the CPU or GPU, the model's width and the batch
shapes, so no flag list predicts it (an AVX-512 BF16 CPU can run bf16 matmuls at half the
fp32 rate). At start-up, `measure_precision` times the model's own training step (the whole
step over a few real training batches: forward, backward, clipping and an Adam update, as the
`Trainer` takes it) in each candidate precision, alternating, logs both rates and returns the
faster. The same timing gives `auto`'s expected updates (`aiayn.training.auto_settings`).
A reduced precision must win by `margin` (default 5%):
it rounds more, so a tie goes to fp32. The timing leaves the weights, the gradients and the
random number generators as it found them, so training continues exactly as it would have
with that precision set by hand.

The precision also decides how attention runs: `float32_attention`, which every training model
holds (`use_float32_attention`), computes Eq. 1 in float32 inside a CPU bf16 autocast.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import nn

from aiayn.core.errors import ConfigError
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
    """The precision with the most tokens per second when it beats fp32's by more than `margin`
    (a reduced precision rounds more, so a near tie goes to fp32), else 'fp32'."""
    rates = {precision: tokens / max(seconds, 1e-12) for precision, (seconds, tokens) in totals.items()}
    fastest = max((p for p in rates if p != "fp32"), key=rates.__getitem__, default="fp32")
    if fastest != "fp32" and rates[fastest] > (1.0 + margin) * rates.get("fp32", 0.0):
        return fastest
    return "fp32"


def training_step_runner(
    model: nn.Module,
    batches: Sequence[Any],
    loss_fn: Callable[..., tuple[torch.Tensor, int]],
    label_smoothing: float,
    device: torch.device,
) -> Callable[[str, int], int]:
    """`run_step(precision, round)`: one whole training step on `batches[round % len]`, as the
    `Trainer` takes it: the batch copied to `device`, forward and backward, the loss read on the
    host, the gradient norm clipped, and an update by an Adam like the Trainer's (fused on CPU
    and CUDA) at learning rate 0, its moments thrown away afterwards. The caller restores the
    weights (`measure_training_steps`)."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=0.0, fused=device.type in ("cpu", "cuda")) if params else None

    def run_step(precision: str, round_: int) -> int:
        batch = batches[round_ % len(batches)].to(device, non_blocking=True)
        with precision_context(precision, device):
            with autocast(precision, device):
                loss, num_tokens = loss_fn(model, batch, label_smoothing)
            loss.backward()
        float(loss.detach())  # the Trainer reads every step's loss on the host
        float(torch.nn.utils.clip_grad_norm_(params, 1.0))
        if optimizer is not None:
            optimizer.step()
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
    overhead_s: float = 0.0,
) -> dict[str, tuple[float, int]]:
    """`time_precisions` of the model's whole training step (`training_step_runner`) over
    `batches` in each of `precisions`, plus `overhead_s` per step (what the training loop spends
    besides the step: drawing its batch, `probe_batches` times it); weights, gradients (left as
    None) and RNG states are unchanged afterwards."""
    steps = dict.fromkeys(precisions, 0)
    with training_state_kept(model, device):
        runner = training_step_runner(model, batches, loss_fn, label_smoothing, device)

        def counted(precision: str, round_: int) -> int:
            if round_ > 0:  # a timed round
                steps[precision] += 1
            return runner(precision, round_)

        totals = time_precisions(counted, list(precisions), rounds, timer=timer, budget_s=budget_s)
    return {p: (seconds + steps[p] * overhead_s, tokens) for p, (seconds, tokens) in totals.items()}


@contextlib.contextmanager
def training_state_kept(model: nn.Module, device: torch.device) -> Iterator[None]:
    """Timed training steps inside leave the weights, the gradients (None) and the RNG states
    (dropout's draws) as they were, so training continues as if they had not been taken."""
    was_training = model.training
    model.train()
    saved = [p.detach().clone() for p in model.parameters()]
    rng_devices = [device] if device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=rng_devices):
            yield
    finally:
        with torch.no_grad():
            for param, value in zip(model.parameters(), saved, strict=True):
                param.copy_(value)
        model.zero_grad(set_to_none=True)
        model.train(was_training)


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
    """The precision for training `model` on `device` of `precision_candidates`, measured (see
    the module docstring).

    `batches` are a few real training batches (round r trains on `batches[r % len]`). Devices
    without bf16 autocast, and CPUs without bf16 instructions, get 'fp32' unmeasured.
    Weights, gradients (left as None) and RNG states are unchanged afterwards.
    """
    candidates = precision_candidates(device, bf16_worth_measuring(device))
    if not batches or len(candidates) == 1:
        log.info("train.precision auto: fp32 (no bf16 instructions on %s to measure)", device.type)
        return "fp32"
    started = time.perf_counter()
    totals = measure_training_steps(
        model, batches, loss_fn, label_smoothing, device, candidates,
        rounds=rounds, budget_s=budget_s, timer=timer,
    )
    choice = pick_fastest(totals)
    rates = {p: tokens / max(seconds, 1e-12) for p, (seconds, tokens) in totals.items()}
    log.info(
        "train.precision auto: %s (training steps timed on this machine, %.1f s); using %s",
        ", ".join(f"{p} {rate:,.0f} target tokens/s" for p, rate in rates.items()),
        time.perf_counter() - started,
        choice,
    )
    return choice


def probe_batches(dataset: Any, batch_tokens: int, seed: int, count: int = 4) -> list[Any]:
    """The first `count` batches of a shuffled epoch (a fixed epoch, so every rank and every
    resume draws the same ones); the training loop's own data position is untouched."""
    return timed_probe_batches(dataset, batch_tokens, seed, count)[0]


def timed_probe_batches(
    dataset: Any, batch_tokens: int, seed: int, count: int = 4, timer: Timer = time.perf_counter
) -> tuple[list[Any], float]:
    """`probe_batches`, and the seconds drawing one took (after the first: an epoch's set-up,
    its shuffle, comes once an epoch), the loop's cost of a batch besides the step."""
    batches, times = [], []
    before = timer()
    for batch in dataset.batches(batch_tokens, shuffle=True, seed=seed, epoch=0):
        times.append(timer() - before)
        batches.append(batch)
        if len(batches) == count:
            break
        before = timer()
    later = times[1:] or times
    return batches, sum(later) / max(len(later), 1)


def choose_precision(
    cfg: TrainConfig,
    recorded: str,
    model: nn.Module,
    train_data: Any,
    loss_fn: Callable[..., tuple[torch.Tensor, int]],
    device: torch.device,
    dist: DistContext,
) -> str:
    """The precision a run trains in: `cfg.precision` when set by hand; for 'auto',
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


# ---------------------------------------------------------------- precisions of a CUDA GPU
CUDA_ONLY = {"tf32": "TF32 is a format of NVIDIA's tensor cores",
             "fp16": "fp16 autocast needs a gradient scaler, which aiayn uses on CUDA only; on a CPU, bf16"}
"""Precisions only a CUDA device trains in, and why."""


def check_precision(precision: str, device: torch.device) -> None:
    """`ConfigError` naming the fix for a precision `device` cannot train in (`CUDA_ONLY`)."""
    if precision in CUDA_ONLY and device.type != "cuda":
        raise ConfigError(f"train.precision={precision} needs a CUDA GPU ({CUDA_ONLY[precision]}); "
                          f"this run trains on {device.type}: set train.precision to fp32, bf16 or auto")


def precision_candidates(device: torch.device, bf16: bool) -> list[str]:
    """What `train.precision: auto` times on `device`, fp32 first: on a CUDA GPU also tf32 and
    bf16 (fp16 where the GPU has no bf16); on a CPU bf16 where it is worth it. `bf16`:
    `bf16_worth_measuring(device)`."""
    if device.type == "cuda":
        return ["fp32", "tf32", "bf16" if bf16 else "fp16"]
    return ["fp32", "bf16"] if bf16 else ["fp32"]


@contextlib.contextmanager
def precision_context(precision: str, device: torch.device) -> Iterator[None]:
    """What a precision sets for the whole step (forward and backward), restored on the way out:
    'tf32' lets CUDA's fp32 matmuls and convolutions run as TF32 (`torch.set_float32_matmul_precision
    ('high')`); every other precision sets nothing here (autocast is per forward pass)."""
    if precision != "tf32" or device.type != "cuda":
        yield
        return
    matmul, cudnn = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(matmul)
        torch.backends.cudnn.allow_tf32 = cudnn


def grad_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler | None:
    """The gradient scaler fp16 training needs on CUDA (its gradients underflow unscaled), else None."""
    return torch.amp.GradScaler("cuda") if precision == "fp16" and device.type == "cuda" else None


ATTENTION_BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")
"""`scaled_dot_product_attention`'s kernels a CUDA run may use, in PyTorch's order of preference:
flash (fp16/bf16), memory-efficient (any dtype), and the plain one where neither takes the
shapes. cuDNN's is left out: PyTorch prefers it for bf16 on recent GPUs, and with batches whose
shapes change every step it made bf16 slower than fp32 (RESULTS.md, "`auto` on a GPU")."""


def attention_backends(device: torch.device) -> list[Any] | None:
    """The attention kernels a run on `device` allows (`ATTENTION_BACKENDS`); None on a CPU,
    where PyTorch's own choice stands."""
    if device.type != "cuda":
        return None
    from torch.nn.attention import SDPBackend

    return [getattr(SDPBackend, name) for name in ATTENTION_BACKENDS]


def attention_context(device: torch.device) -> contextlib.AbstractContextManager:
    """The context a training run holds its steps in: `attention_backends` on CUDA."""
    backends = attention_backends(device)
    if backends is None:
        return contextlib.nullcontext()
    from torch.nn.attention import sdpa_kernel

    return sdpa_kernel(backends)
