"""Checked numeric command-line options, and one-line argument errors.

Every numeric option is declared with one of these argparse types, so a bad value is refused
as the command line is parsed, with the option's name:

    parser.add_argument("--alpha", type=finite_float(0, 10), default=0.6)
    parser.add_argument("--beam", type=bounded_int(1), default=4)

    $ aiayn translate --model runs/dates --alpha nan
    aiayn translate: error: argument --alpha: must be a finite number in [0, 10], got 'nan' (see ...)

The ranges are `aiayn.core.ranges.Range`, the same check config files get.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from aiayn.core.ranges import Range


def number_type(allowed: Range) -> Callable[[str], int | float]:
    """An argparse `type`: parse the option's text as a number and check it against `allowed`."""

    def parse(text: str) -> int | float:
        try:
            value: int | float = int(text) if allowed.integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed.describe()}, got {text!r}") from None
        if not allowed.contains(value):
            raise argparse.ArgumentTypeError(f"must be {allowed.describe()}, got {text!r}")
        return value

    parse.__name__ = "integer" if allowed.integer else "number"  # argparse's fallback wording
    return parse


def finite_float(
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> Callable[[str], float]:
    """A float option that must be finite and within `low`..`high` (None: unbounded;
    `low_open`/`high_open` exclude the bound)."""
    return number_type(Range(low, high, low_open, high_open))  # type: ignore[return-value]


def bounded_int(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """An integer option within `low`..`high` (inclusive; None: unbounded)."""
    return number_type(Range(low, high, integer=True))  # type: ignore[return-value]


class ArgumentParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` whose errors are one line (exit status 2):
    `aiayn translate: error: argument --beam: must be an integer >= 1, got '0' (see
    'aiayn translate --help')`; argparse's own prints the usage first, over several lines.
    A mistyped command or option gets "did you mean ...?" (`aiayn.cli.help.with_suggestion`).

    Subparsers made with `add_subparsers` are of this class too, and a command's own parser
    refuses an option it does not know itself (so the suggestion comes from its options).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from aiayn.cli.help import HelpFormatter

        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        is_command = not any(isinstance(a, argparse._SubParsersAction) for a in self._actions)
        if extras and is_command:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        from aiayn.cli.help import with_suggestion

        message = with_suggestion(message, self)
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def device_option(value: str) -> str | None:
    """The `--device` value as `aiayn.load` takes it: 'auto' -> None (CUDA when available)."""
    return None if value == "auto" else value
