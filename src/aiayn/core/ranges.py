"""Allowed ranges of numeric settings: one check for every number a user gives aiayn.

A `Range` says what a number may be (finite, integer or not, between bounds); `Range.check`
refuses anything else with a `ConfigError` that names the setting (`train.lr`, `--alpha`):

    POSITIVE = Range(low=0, low_open=True)
    POSITIVE.check("train.lr", float("nan"))   # ConfigError: train.lr must be a finite number > 0, got nan

Config files check their fields with it (`aiayn.training.config`) and the command line its
options (`aiayn.cli.arguments`), so NaN, infinity and out-of-range values are refused where
they are read, not discovered later as garbage output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aiayn.core.errors import ConfigError


@dataclass(frozen=True)
class Range:
    """The values a numeric setting accepts: finite, within `low`..`high` (None: unbounded;
    `low_open`/`high_open` exclude the bound itself), and whole numbers when `integer`."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False

    def describe(self) -> str:
        """What the range allows, e.g. 'an integer >= 1' or 'a finite number in (0, 1]'."""
        kind = "an integer" if self.integer else "a finite number"
        low, high = _show(self.low), _show(self.high)
        if self.low is not None and self.high is not None:
            return f"{kind} in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{kind} {'>' if self.low_open else '>='} {low}"
        if self.high is not None:
            return f"{kind} {'<' if self.high_open else '<='} {high}"
        return kind

    def contains(self, value: object) -> bool:
        """Whether `value` (a number; bools are not numbers here) is in the range."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def schema_bounds(self) -> dict[str, float]:
        """The range as pydantic `Field` keywords (`ge`/`gt`, `le`/`lt`), so that a request model
        and its OpenAPI schema declare exactly this range."""
        bounds: dict[str, float] = {}
        if self.low is not None:
            bounds["gt" if self.low_open else "ge"] = self.low
        if self.high is not None:
            bounds["lt" if self.high_open else "le"] = self.high
        return bounds

    def check(self, name: str, value: object) -> object:
        """Return `value` if it is in the range, else raise `ConfigError` naming `name`."""
        if not self.contains(value):
            raise ConfigError(f"{name} must be {self.describe()}, got {value!r}")
        return value


def _show(bound: float | None) -> str:
    """A bound as written in messages: 1 rather than 1.0 (but 3.4028234663852886e+38 as such)."""
    if bound is None:
        return ""
    if isinstance(bound, int):
        return str(bound)
    return str(int(bound)) if bound.is_integer() and abs(bound) < 1e15 else repr(bound)


ANY_NUMBER = Range()
POSITIVE = Range(low=0, low_open=True)
NON_NEGATIVE = Range(low=0)
PROBABILITY = Range(low=0, high=1, high_open=True)
"""A dropout or smoothing rate: [0, 1)."""

POSITIVE_INT = Range(low=1, integer=True)
NON_NEGATIVE_INT = Range(low=0, integer=True)
