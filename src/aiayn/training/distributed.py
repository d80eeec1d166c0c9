"""Several processes, one model: DistributedDataParallel under `torchrun`.

`torchrun --nproc_per_node=N -m aiayn train CONFIG` starts N copies of the program with
`RANK`, `WORLD_SIZE`, `LOCAL_RANK` (and `MASTER_ADDR`/`MASTER_PORT`) in their environment.
:func:`distributed_session` reads them, joins the process group (NCCL when the processes
train on CUDA GPUs, gloo otherwise; `train.dist_backend` overrides) and hands back a
:class:`DistContext` that the run code passes on explicitly; without those variables it is
a single process and nothing is initialised.

What the Trainer does with it (see `aiayn.training.trainer`):

* each rank trains on `cuda:LOCAL_RANK` (on GPUs) with the model wrapped in DDP; the raw
  model stays available (`trainer.model`, `ddp.module`) for saving and evaluation;
* each rank reads its own disjoint share of every epoch's batches (`BatchedDataset.batches`
  with `rank`/`world_size`), the same number per rank;
* the loss of a step is divided by the *global* number of target tokens (summed over ranks)
  and multiplied by the world size, because DDP averages gradients over ranks: the gradients
  are those of one process on the union of all ranks' batches;
* rank 0 alone validates and writes logs, metrics and checkpoints; the other ranks wait at
  a barrier, and rank 0's decision to stop (budget, early stopping) is broadcast so that all
  ranks stop at the same step.

The run skeleton (`aiayn.training.run`) wires it up for every task: `train_in_session` opens
`distributed_session(cfg.device, cfg.dist_backend)` around the run; `run_task` writes files
only on `dist.is_main` (run directory, tokenizer, results), gives every rank the same
tokenizer (`broadcast_object` of rank 0's; for a task whose training data is a token store,
local rank 0 of each machine prepares or finds the store, the machine's other ranks map it,
and all ranks compare their tokenizers: `aiayn.training.run.shared_data`) and passes `dist=`
to the `Trainer`. A task's data is a `BatchedDataset` (`aiayn.data.batching`), which gives
every rank equally many batches (see `shard`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from aiayn.core.errors import CheckpointError, ConfigError
from aiayn.training.checkpoint import CHECKPOINTS, list_checkpoints

log = logging.getLogger(__name__)

BACKENDS = ("auto", "gloo", "nccl")
TIMEOUT = timedelta(minutes=30)  # how long ranks wait for each other (e.g. while rank 0 validates)
SETTLE_SECONDS = 10  # the longest `_settle` waits for gloo's worker threads


@dataclass(frozen=True)
class DistContext:
    """Where this process stands among the training processes (one process by default)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None  # None: no process group (a single process)

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that validates and writes files."""
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        """A process group is active (under torchrun, even with one process)."""
        return self.backend is not None


def torchrun_environment() -> tuple[int, int, int] | None:
    """(rank, world_size, local_rank) from the variables torchrun sets, or None when absent."""
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
    values = [os.environ.get(name) for name in names]
    if all(v is None for v in values[:2]):
        return None
    try:
        rank, world_size = int(values[0]), int(values[1])  # type: ignore[arg-type]
        local_rank = int(values[2]) if values[2] is not None else rank
    except (TypeError, ValueError):
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(names, values, strict=True))
        raise ConfigError(f"bad torchrun environment: {shown} (need integers)") from None
    if world_size < 1 or not 0 <= rank < world_size or local_rank < 0:
        raise ConfigError(f"bad torchrun environment: RANK={rank}, WORLD_SIZE={world_size}")
    return rank, world_size, local_rank


def resolve_backend(backend: str, device: str) -> str:
    """'auto' -> 'nccl' when the processes train on CUDA, else 'gloo'; names pass through."""
    if backend not in BACKENDS:
        raise ConfigError(f"train.dist_backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    if backend != "auto":
        return backend
    on_cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    return "nccl" if on_cuda else "gloo"


def rank_device(device: torch.device, context: DistContext) -> torch.device:
    """The device of this rank: `cuda:LOCAL_RANK` for CUDA under torchrun, else `device`."""
    if context.enabled and device.type == "cuda" and device.index is None:
        return torch.device("cuda", context.local_rank)
    return device


def init_distributed(device: str = "auto", backend: str = "auto") -> DistContext:
    """Join the process group when started by torchrun; a single-process context otherwise.

    Args:
        device: the configured training device (`train.device`), to choose the backend.
        backend: 'auto', 'gloo' or 'nccl' (`train.dist_backend`).
    """
    found = torchrun_environment()
    if found is None:
        resolve_backend(backend, device)  # still reject a bad name
        return DistContext()
    rank, world_size, local_rank = found
    name = resolve_backend(backend, device)
    if name == "nccl":
        if not torch.cuda.is_available():
            raise ConfigError("train.dist_backend 'nccl' needs CUDA GPUs; use 'gloo' on CPUs")
        if local_rank >= torch.cuda.device_count():
            raise ConfigError(
                f"LOCAL_RANK={local_rank} but only {torch.cuda.device_count()} GPU(s) are visible; "
                "start at most one process per GPU (torchrun --nproc_per_node)"
            )
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        # `torch.distributed.nn`'s functions default to `group=group.WORLD`, a value taken when
        # the module is first imported (DDP imports it). Imported after the group exists, they
        # would hold the group for the rest of the process: `destroy_process_group` could not
        # free it, and its communication threads would still run while the interpreter exits.
        # Imported first, their default is None (the default group, looked up at each call), and
        # `shutdown` stops those threads.
        import torch.distributed.nn as _distributed_nn  # noqa: F401

        dist.init_process_group(backend=name, rank=rank, world_size=world_size, timeout=TIMEOUT)
    context = DistContext(rank, world_size, local_rank, name)
    if context.is_main:
        log.info("distributed: %d process(es), backend %s", world_size, name)
    return context


def shutdown(context: DistContext) -> None:
    """Leave the process group (if this context joined one)."""
    if context.enabled and dist.is_initialized():
        dist.destroy_process_group()


@contextlib.contextmanager
def distributed_session(device: str = "auto", backend: str = "auto") -> Iterator[DistContext]:
    """`with distributed_session(cfg.device, cfg.dist_backend) as context:` init ... shutdown.

    On non-main ranks the `aiayn` logger is raised to WARNING, so rank 0 alone logs progress.
    """
    context = init_distributed(device, backend)
    logger = logging.getLogger("aiayn")
    level = logger.level
    if not context.is_main:
        logger.setLevel(logging.WARNING)
    try:
        yield context
    finally:
        logger.setLevel(level)
        shutdown(context)


def wrap_model(model: nn.Module, device: torch.device, context: DistContext) -> nn.Module:
    """`model` in DistributedDataParallel when a process group is active, else `model` itself.

    DDP broadcasts rank 0's parameters at construction, so all ranks start equal.
    """
    if not context.enabled:
        return model
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids)


def no_sync(model: nn.Module, skip: bool) -> contextlib.AbstractContextManager:
    """DDP's `no_sync()` (no gradient all-reduce in this backward) when `skip`, else a no-op."""
    if skip and hasattr(model, "no_sync"):
        return model.no_sync()
    return contextlib.nullcontext()


def _collective_device(context: DistContext, device: torch.device) -> torch.device:
    return device if context.backend == "nccl" else torch.device("cpu")


def _object_device(context: DistContext) -> torch.device:
    if context.backend == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _settle(context: DistContext, *tensors: torch.Tensor) -> None:
    """Return once gloo's worker threads have let go of `tensors` (each held by Python alone).

    A gloo worker thread drops its reference to a finished collective a moment after the caller
    has been told it finished. Were the caller's tensor gone by then, the thread would free the
    tensor's Python object and so need the GIL: while the main thread, holding the GIL, destroys
    the process group (which joins that thread), they wait on each other for ever; while the
    interpreter exits, the thread is stopped inside a C++ destructor, which aborts the process.
    Every collective here passes tensors that only this module sees, and settles them, so no
    worker thread ever needs the GIL. (NCCL's threads do not free tensors this way.)
    """
    if context.backend != "gloo":
        return
    deadline = time.monotonic() + SETTLE_SECONDS
    while any(tensor._use_count() > 1 for tensor in tensors):
        if time.monotonic() > deadline:  # never hang here, whatever a future torch holds on to
            log.warning("a gloo collective's tensor is still held after %g s; going on", SETTLE_SECONDS)
            return
        time.sleep(0)  # lets the worker thread run; it needs no GIL, only the CPU


def all_reduce_sum(values: list[float], context: DistContext, device: torch.device) -> list[float]:
    """Element-wise sums of `values` over all ranks (as float64); `values` alone without a group."""
    if not context.enabled:
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64, device=_collective_device(context, device))
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    _settle(context, tensor)
    return tensor.tolist()


def all_reduce_max(values: list[int], context: DistContext, device: torch.device) -> list[int]:
    """Element-wise maxima of `values` over all ranks; `values` alone without a group."""
    if not context.enabled:
        return list(values)
    tensor = torch.tensor(values, dtype=torch.int64, device=_collective_device(context, device))
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    _settle(context, tensor)
    return [int(v) for v in tensor.tolist()]


def _pickled(value: Any, device: torch.device) -> torch.Tensor:
    """`value` pickled into a uint8 tensor of shape (N,)."""
    return torch.frombuffer(bytearray(pickle.dumps(value)), dtype=torch.uint8).to(device)


def _unpickled(data: torch.Tensor) -> Any:
    return pickle.loads(data.cpu().numpy().tobytes())


def broadcast_object(value: Any, context: DistContext, src: int = 0) -> Any:
    """Rank `src`'s `value` on every rank (pickled); `value` itself without a group.

    What `dist.broadcast_object_list` does, through tensors this module settles (`_settle`).
    """
    if not context.enabled:
        return value
    device = _object_device(context)
    data = _pickled(value, device) if context.rank == src else None
    size = torch.tensor([0 if data is None else data.numel()], dtype=torch.int64, device=device)
    dist.broadcast(size, src=src)
    _settle(context, size)
    if data is None:
        data = torch.empty(int(size.item()), dtype=torch.uint8, device=device)
    dist.broadcast(data, src=src)
    _settle(context, data)
    return value if context.rank == src else _unpickled(data)


def all_gather_object(value: Any, context: DistContext) -> list[Any]:
    """Every rank's `value`, in rank order; `[value]` without a group.

    What `dist.all_gather_object` does, through tensors this module settles (`_settle`).
    """
    if not context.enabled:
        return [value]
    device = _object_device(context)
    data = _pickled(value, device)
    size = torch.tensor([data.numel()], dtype=torch.int64, device=device)
    sizes = [torch.empty_like(size) for _ in range(context.world_size)]
    dist.all_gather(sizes, size)
    _settle(context, size, *sizes)
    longest = max(int(s.item()) for s in sizes)
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    padded[: data.numel()] = data
    gathered = [torch.empty_like(padded) for _ in range(context.world_size)]
    dist.all_gather(gathered, padded)
    _settle(context, padded, *gathered)
    return [_unpickled(g[: int(s.item())]) for g, s in zip(gathered, sizes, strict=True)]


def barrier(context: DistContext) -> None:
    """Wait until every rank gets here (no-op without a group)."""
    if not context.enabled:
        return
    if context.backend == "nccl":
        dist.barrier(device_ids=[torch.cuda.current_device()])
    else:
        dist.barrier()


def convert_position(batch_in_epoch: int, saved_world_size: int, world_size: int) -> int:
    """A rank's batch position in an epoch after resuming with a different number of ranks.

    Each rank reads every `world_size`-th batch of the epoch's plan, so `batch_in_epoch`
    per-rank batches cover `batch_in_epoch * saved_world_size` batches of the plan; the new
    ranks start after them (rounded up: a few batches may be skipped, none repeated).
    """
    if saved_world_size == world_size:
        return batch_in_epoch
    consumed = batch_in_epoch * saved_world_size
    return -(-consumed // world_size)


def newest_checkpoint(run_dir: Path, context: DistContext) -> Path | None:
    """The newest complete checkpoint of `run_dir` as rank 0 sees it, on every rank (or None)."""
    checkpoints = list_checkpoints(run_dir)
    name = broadcast_object(checkpoints[-1].name if checkpoints else None, context)
    if name is None:
        return None
    path = Path(run_dir) / CHECKPOINTS / name
    if not path.is_dir():
        raise CheckpointError(
            f"rank {context.rank} cannot see {path}, rank 0's newest checkpoint: resuming on several "
            "machines needs the run directory on a shared filesystem (or copied to each machine)"
        )
    return path


def rng_state() -> dict[str, Any]:
    """This process's random number generator states (CPU, and CUDA when present)."""
    state = {"rng_cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["rng_cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any], context: DistContext, seed: int) -> None:
    """Restore this rank's RNG states from a checkpoint's training state.

    A checkpoint of a distributed run holds every rank's states (`rng_ranks`); one of a
    single process holds its own (`rng_cpu`/`rng_cuda`). When the number of ranks changed,
    each rank is seeded afresh with `seed + rank` instead (dropout then differs per rank).
    """
    ranks = state.get("rng_ranks")
    if context.world_size > 1 and not (ranks and len(ranks) == context.world_size):
        torch.manual_seed(seed + context.rank)
        return
    mine = ranks[context.rank] if ranks else state
    torch.set_rng_state(mine["rng_cpu"])
    if torch.cuda.is_available() and "rng_cuda" in mine:
        torch.cuda.set_rng_state_all(mine["rng_cuda"])
