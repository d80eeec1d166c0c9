"""`aiayn`: the command-line entry point.

Each subcommand lives in its own module of `aiayn.cli` and provides
`register(subparsers)`, which adds its parser and sets `func` to the function to run.
Errors that aiayn raises on bad input (`AiaynError`), and bad arguments, are printed as one
line without a traceback and exit with status 2; Ctrl-C exits with status 130 (`aiayn train`
first writes a checkpoint).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Iterator

from aiayn import __version__
from aiayn.cli.arguments import ArgumentParser
from aiayn.core.errors import AiaynError

# Subcommand modules (`aiayn --help` lists the commands in the groups of `aiayn.cli.help.GROUPS`).
COMMAND_MODULES = [
    "train", "prepare", "lm", "classify", "average", "translate", "evaluate", "score", "export", "import_",
    "shapes", "plot", "explore", "serve", "completion", "cache",
]


def build_parser() -> argparse.ArgumentParser:
    from aiayn.cli.help import add_examples, group_commands

    parser = ArgumentParser(
        prog="aiayn",
        usage="aiayn [-h] [--version] COMMAND ...",
        description="The Transformer of 'Attention Is All You Need', from scratch.",
    )
    parser.add_argument("--version", action="version", version=f"aiayn {__version__}")
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", prog="aiayn", help=argparse.SUPPRESS  # listed in groups instead
    )
    for name in COMMAND_MODULES:
        importlib.import_module(f"aiayn.cli.{name}").register(subparsers)
    group_commands(parser, subparsers)
    add_examples(parser)
    return parser


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request and exit, when the shell asks (argcomplete sets
    $_ARGCOMPLETE; `aiayn completion SHELL` prints the script that does)."""
    if "_ARGCOMPLETE" in os.environ:
        from aiayn.cli.completion import argcomplete_module

        with contextlib.suppress(AiaynError):  # without the extra: no completion, no noise
            argcomplete_module().autocomplete(parser)


@contextlib.contextmanager
def log_to_stderr() -> Iterator[None]:
    """Show aiayn's log messages (INFO and up) on stderr while a command runs (printed above
    an open progress bar)."""
    from aiayn.core.progress_display import TqdmLoggingHandler

    logger = logging.getLogger("aiayn")
    handler = TqdmLoggingHandler(sys.stderr)  # above a progress bar, not glued onto it
    handler.setFormatter(logging.Formatter("%(message)s"))
    previous_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    complete(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version, or a bad argument (its one line printed)
        return exit_.code if isinstance(exit_.code, int) else 2
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    try:
        with log_to_stderr():
            return int(args.func(args) or 0)
    except AiaynError as error:
        print(f"aiayn {args.command}: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `aiayn translate ... | head`
        return 0
    except KeyboardInterrupt:  # Ctrl-C outside training's own handler (which checkpoints first)
        print(f"\naiayn {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
