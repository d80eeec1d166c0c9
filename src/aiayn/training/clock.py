"""The training clock: how long a run has trained, across resumes, against its time budget.

A `TrainClock` holds the training time of earlier sessions (read from the newest checkpoint)
and adds the time of this session while it runs. Everything between `start()` and `stop()`
counts, validation and checkpoint writing included: the budget (`train.max_minutes`) is the
wall-clock time a user waits for. Start-up work before `start()` (data, tokenizer, the
precision timing) does not count.

The clock's reading is a query (`elapsed_s()`); it changes only by `start`/`stop` and by
`load_state_dict` on resume. Under torchrun each rank has its own clock; the trainer uses
rank 0's reading on every rank (see `aiayn.training.trainer`). The time source is
`time.perf_counter` unless a test passes a fake one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

Timer = Callable[[], float]
"""A clock in seconds; only differences between its readings matter."""


class TrainClock:
    """Training time so far (seconds, over all sessions of a run) and the time budget.

    Args:
        budget_s: the time budget in seconds (`60 * train.max_minutes`), or None for none.
        timer: the time source (`time.perf_counter`; tests pass a fake one).
    """

    def __init__(self, budget_s: float | None = None, timer: Timer = time.perf_counter) -> None:
        self.budget_s = budget_s
        self.timer = timer
        self._earlier_s = 0.0  # the time of finished sessions (and of this one up to the last stop)
        self._started: float | None = None  # the timer's reading at `start`, while running

    @property
    def running(self) -> bool:
        return self._started is not None

    def start(self) -> None:
        """Count the time from now on (no effect when already running)."""
        if self._started is None:
            self._started = self.timer()

    def stop(self) -> None:
        """Stop counting; the time so far is kept (no effect when not running)."""
        self._earlier_s = self.elapsed_s()
        self._started = None

    def elapsed_s(self) -> float:
        """Seconds of training so far, earlier sessions included."""
        if self._started is None:
            return self._earlier_s
        return self._earlier_s + self.timer() - self._started

    def budget_share(self, elapsed_s: float | None = None) -> float | None:
        """`elapsed_s` (default: now) as a share of the budget, at most 1; None without a budget."""
        if self.budget_s is None or self.budget_s <= 0:
            return None
        elapsed = self.elapsed_s() if elapsed_s is None else elapsed_s
        return min(elapsed / self.budget_s, 1.0)

    def out_of_time(self, elapsed_s: float | None = None) -> bool:
        """Whether the budget is spent at `elapsed_s` (default: now)."""
        elapsed = self.elapsed_s() if elapsed_s is None else elapsed_s
        return self.budget_s is not None and elapsed >= self.budget_s

    # ------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint stores: the training time so far (and the budget, for reference)."""
        return {"elapsed_s": self.elapsed_s(), "budget_s": self.budget_s}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint's `state_dict()` (the budget stays this run's own)."""
        elapsed = state.get("elapsed_s", 0.0)
        if isinstance(elapsed, bool) or not isinstance(elapsed, (int, float)) or not elapsed >= 0:
            raise ValueError(f"elapsed_s must be a number >= 0, got {elapsed!r}")
        self._earlier_s = float(elapsed)
        if self._started is not None:
            self._started = self.timer()


def validation_allowance(share: float, elapsed_s: float, spent_s: float, this_far_s: float = 0.0) -> float:
    """Seconds a validation may still take so that all validations together take at most `share`
    of the training time (`train.bleu_time_share`): `elapsed_s` of the run so far (validations
    included), `spent_s` of it in earlier validations, `this_far_s` in this one already (its loss).
    What an earlier validation left unused carries over; never below 0."""
    training_s = elapsed_s - spent_s - this_far_s
    return max(0.0, share * training_s - spent_s - this_far_s)
