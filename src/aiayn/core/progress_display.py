"""Progress on stderr that suits a terminal and a log file alike.

Four modes (`train.progress`, and the `--progress` option of the commands that read long input):

- `bar`: a tqdm bar, redrawn in place (carriage returns): for a person at a terminal;
- `plain`: one ordinary line every `interval_s` seconds, and one at the end: no carriage return,
  so a file written under nohup, a scheduler or CI stays a readable log;
- `none`: nothing;
- `auto` (the default): `bar` when stderr is a terminal, else `plain`.

A bar's position and total are what the work is measured in: for training, the run's budget
(`aiayn.training.progress.run_progress`): the time budget in seconds where the run has one,
else its steps; for input, lines. The ETA follows the position, so a budgeted run's ETA is the
budget left, not the steps it will never reach.

Log messages (`aiayn`'s logger) go through `TqdmLoggingHandler`, which prints them above an open
bar (`tqdm.write`) instead of glued onto it.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import IO, Any

PROGRESS_MODES = ("auto", "bar", "plain", "none")
"""The values of `train.progress` and of `--progress`."""

DEFAULT_INTERVAL_S = 30.0
"""Seconds between two `plain` lines unless told otherwise."""

LONG_INPUT_LINES = 500
"""Inputs of more lines than this show progress on stderr (`aiayn translate`, `evaluate`, ...)."""


def resolve_mode(mode: str, stream: IO[str] | None = None) -> str:
    """`bar`, `plain` or `none` for `mode` (`auto`: a bar when `stream`, default stderr, is a
    terminal, else plain lines)."""
    if mode not in PROGRESS_MODES:
        raise ValueError(f"progress mode must be one of {', '.join(PROGRESS_MODES)}, got {mode!r}")
    if mode != "auto":
        return mode
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return "bar" if isatty is not None and isatty() else "plain"


def clock_text(seconds: float | None) -> str:
    """Seconds as `m:ss` or `h:mm:ss` ('?' when unknown)."""
    if seconds is None or seconds != seconds or seconds < 0 or seconds == float("inf"):
        return "?"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class ProgressDisplay:
    """One progress display: a tqdm bar, plain lines every `interval_s` seconds, or nothing.

    `update(position, fields)` moves it to `position` (out of `total`, in `unit`s; None: unknown)
    and shows `fields` (name -> text); `close()` ends it (plain mode: one last line). `total`,
    `unit` and `mode` say what it counts, for a reader (and a test).

    Args:
        mode: one of `PROGRESS_MODES` (`auto` is resolved against `stream`).
        total: the position at the end (None: unknown, as for a run bounded by epochs only).
        unit: what the position counts: 's' (a time budget), 'step', 'line'.
        what: the line's first word in plain mode ('train', 'translate').
        interval_s: seconds between plain lines (default `DEFAULT_INTERVAL_S`).
        stream: where it writes (default: stderr, looked up when used).
        initial: the position it starts from (a resumed run).
        timer: the clock (seconds; `time.monotonic` by default).
    """

    def __init__(
        self, mode: str, total: float | None, unit: str, what: str, *, interval_s: float | None = None,
        stream: IO[str] | None = None, initial: float = 0.0, timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mode = resolve_mode(mode, stream)
        self.total, self.unit, self.what = total, unit, what
        self.interval_s = DEFAULT_INTERVAL_S if interval_s is None else interval_s
        self._stream = stream
        self._timer = timer
        self._start = timer()
        self._initial = self.position = initial
        self._last_line: float | None = None
        self.fields: dict[str, str] = {}
        self._elapsed_s: float | None = None
        self._of: str | None = None
        self._bar: Any = None
        if self.mode == "bar":
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=total, initial=initial, unit=unit, dynamic_ncols=True, file=self.stream,
                bar_format=BUDGET_BAR if unit == "s" else None,
            )

    @property
    def stream(self) -> IO[str]:
        return sys.stderr if self._stream is None else self._stream

    def update(
        self, position: float, fields: dict[str, str] | None = None, elapsed_s: float | None = None,
        of: str | None = None,
    ) -> None:
        """Move to `position`; show `fields` (kept until replaced; a `step` field leads a plain
        line). `elapsed_s`: the elapsed time a plain line shows (default: since the display
        opened; a resumed training run passes its own, earlier sessions included). `of`: what the
        share is of, in a plain line ('1,500 steps' where a budgeted run's steps bind; default:
        the total)."""
        if fields is not None:
            self.fields = fields
        self._elapsed_s, self._of = elapsed_s, of
        if self._bar is not None:
            if fields is not None:
                self._bar.set_postfix(fields, refresh=False)
            self._bar.update(position - self._bar.n)  # tqdm redraws at most every 0.1 s
        self.position = position
        if self.mode == "plain":
            now = self._timer()
            if now - (self._start if self._last_line is None else self._last_line) >= self.interval_s:
                self._print_line(now)

    def _print_line(self, now: float, ending: str = "") -> None:
        self._last_line = now
        print(self.line(now) + ending, file=self.stream, flush=True)

    def line(self, now: float | None = None) -> str:
        """The plain-mode line for the current position (what, position of total, fields,
        elapsed, ETA)."""
        now = self._timer() if now is None else now
        elapsed = now - self._start
        fields = dict(self.fields)
        parts = [f"{self.what} step {fields.pop('step')}" if "step" in fields else self.what]
        if self.total:
            share = self.position / self.total
            unit = f"{self.total:,.0f} {self.unit}s"
            shown = self._of or (f"{clock_text(self.total)} budget" if self.unit == "s" else unit)
            parts.append(f"{100 * share:5.1f}% of {shown}")
        elif self.unit != "s":
            parts.append(f"{self.position:,.0f} {self.unit}s")
        parts += [f"{name} {value}" for name, value in fields.items()]
        parts.append(f"elapsed {clock_text(elapsed if self._elapsed_s is None else self._elapsed_s)}")
        parts.append(f"ETA {clock_text(self.eta_s(elapsed))}")
        return " | ".join(parts)

    def eta_s(self, elapsed: float) -> float | None:
        """Seconds left at this session's pace (None while unknown)."""
        done = self.position - self._initial
        if not self.total or done <= 0 or elapsed <= 0:
            return None
        return max(self.total - self.position, 0.0) * elapsed / done

    def close(self) -> None:
        """End the display: close the bar, or print the last plain line."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.mode == "plain" and self.position != self._initial:
            self._print_line(self._timer(), " (done)")
        self.mode = "none" if self.mode == "plain" else self.mode

    def __enter__(self) -> ProgressDisplay:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


BUDGET_BAR = "{l_bar}{bar}| {elapsed}<{remaining}{postfix}"
"""A time-budget bar: its share of the budget, the time spent and left, and the fields (the
position in seconds is not worth showing beside the percentage)."""


class TqdmLoggingHandler(logging.StreamHandler):
    """A stderr log handler that prints above an open tqdm bar (`tqdm.write`) rather than after
    its last redraw on the same line; without tqdm loaded it is a plain `StreamHandler`."""

    def emit(self, record: logging.LogRecord) -> None:
        tqdm_module = sys.modules.get("tqdm")
        if tqdm_module is None:
            super().emit(record)
            return
        try:
            tqdm_module.tqdm.write(self.format(record), file=self.stream)
            self.flush()
        except Exception:  # logging must never raise
            self.handleError(record)


class LineProgress:
    """Progress over input lines for the commands that read text (`aiayn translate`, `evaluate`,
    `prepare`, `lm`, `classify`): shown once the input is known to have more than
    `LONG_INPUT_LINES` lines (at the start when `total` is known, else once that many are done),
    never for a short input. `advance(done)` after each chunk; `close()` at the end."""

    def __init__(self, total: int | None, what: str, mode: str = "auto", **kwargs: Any) -> None:
        self.total, self.what, self.mode, self._kwargs = total, what, mode, kwargs
        self.display: ProgressDisplay | None = None
        if total is not None and total > LONG_INPUT_LINES:
            self.display = ProgressDisplay(mode, total, "line", what, **kwargs)

    def advance(self, done: int, fields: dict[str, str] | None = None) -> None:
        """`done` lines of the input are through."""
        if self.display is None and self.total is None and done > LONG_INPUT_LINES:
            self.display = ProgressDisplay(self.mode, None, "line", self.what, **self._kwargs)
        if self.display is not None:
            self.display.update(done, fields)

    def close(self) -> None:
        if self.display is not None:
            self.display.close()

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


LONG_PREPARATION = {"pair": LONG_INPUT_LINES, "character": 100 * LONG_INPUT_LINES}
"""A token store's preparation shows progress when it encodes more than this many units."""


class PreparationProgress:
    """Progress of a token store being made (`aiayn prepare`): `update(done, total)` is the data
    code's `on_progress`; a display opens on the first update of a preparation longer than
    `LONG_PREPARATION[unit]` (a store found in the cache shows nothing)."""

    def __init__(self, mode: str, unit: str, **kwargs: Any) -> None:
        self.mode, self.unit, self._kwargs = mode, unit, kwargs
        self.display: ProgressDisplay | None = None

    def update(self, done: int, total: int) -> None:
        if self.display is None and total > LONG_PREPARATION[self.unit]:
            self.display = ProgressDisplay(self.mode, total, self.unit, "prepare", **self._kwargs)
        if self.display is not None:
            self.display.update(done)

    def __enter__(self) -> PreparationProgress:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.display is not None:
            self.display.close()
