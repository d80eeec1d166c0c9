"""How far a run has come, and settings counted as a share of the run instead of in steps.

A run's progress is the share of its budget spent: max(step / max_steps, elapsed / budget),
at most 1, the same progress that moves a time-following schedule's decay
(`aiayn.training.schedule`). With only `train.max_steps` it is the share of the steps, with only
`train.max_minutes` the share of the time.

`train.warmup` and `train.eval_every` are a number of steps, or a share of the run written as a
percentage (`warmup: 6%`, `eval_every: 6%`). In steps they depend on the machine's speed: on a
machine that reaches a third of the steps in the budget, 400 warmup steps take three times
the share of the run, and checkpoints every 400 steps span the whole run instead of its end.
A share keeps the recipe's shape on any machine. Steps stay the default; a share is opt-in.
"""

from __future__ import annotations

import math

from aiayn.core.settings import parse_share


def run_progress(
    step: int, elapsed_s: float, *, max_steps: int | None, budget_s: float | None
) -> float | None:
    """max(step / max_steps, elapsed_s / budget_s), at most 1; None when the run has neither."""
    shares = []
    if max_steps is not None and max_steps > 0:
        shares.append(step / max_steps)
    if budget_s is not None and budget_s > 0:
        shares.append(elapsed_s / budget_s)
    return min(max(shares), 1.0) if shares else None


class Cadence:
    """When validations (and their checkpoints) fall: every `every` steps, or every share of the
    run's progress (`every` = '6%': at progress 6%, 12%, ...; the first step past each mark).

    Which marks are passed is kept here, so a mark passed during a long step still gives
    one validation, not one per step; `start(progress)` at the beginning of a (resumed) session
    counts the marks already passed before it.
    """

    def __init__(self, every: int | str, name: str = "train.eval_every") -> None:
        self.share = parse_share(name, every)
        self.steps = every if self.share is None else None
        self._marks = 0

    def _marks_at(self, progress: float | None) -> int:
        if self.share is None or progress is None:
            return 0
        return math.floor(progress / self.share + 1e-9)  # 0.15 / 0.05 is 2.9999999999999996

    def start(self, progress: float | None) -> None:
        """Marks passed before this session (a resumed run validated at them already)."""
        self._marks = self._marks_at(progress)

    def due(self, step: int, progress: float | None) -> bool:
        """Whether to validate after `step` at `progress` (a query: nothing changes)."""
        if self.steps is not None:
            return step % self.steps == 0
        return self._marks_at(progress) > self._marks

    def passed(self, progress: float | None) -> None:
        """A validation was made at `progress`: the marks up to it are done."""
        self._marks = max(self._marks, self._marks_at(progress))

    def due_at_end(self, step: int, last_validated_step: int | None) -> bool:
        """Whether the run's end needs a validation of its own (none was made at `step`)."""
        if self.steps is not None:
            return step % self.steps != 0 or step == 0
        return step == 0 or last_validated_step != step
