"""`aiayn completion bash|zsh|fish`: print the shell's completion script for `aiayn`.

The script comes from argcomplete (the optional extra `completion`); it completes commands,
options and choices by asking `aiayn` itself, so it never falls behind the options:

    aiayn completion bash > ~/.local/share/bash-completion/completions/aiayn
    aiayn completion zsh > ~/.zfunc/_aiayn         # with `fpath+=~/.zfunc; autoload -U compinit; compinit`
"""

from __future__ import annotations

import argparse

from aiayn.core.errors import ConfigError

SHELLS = ("bash", "zsh", "fish")
EXTRA = "completion"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "completion", help="print a shell completion script (bash, zsh, fish)",
        description="Print the completion script of SHELL for aiayn's commands, options and choices "
        f"(made by argcomplete: pip install 'aiayn[{EXTRA}]').",
    )
    parser.add_argument("shell", choices=SHELLS, help="the shell the script is for")
    parser.set_defaults(func=run)


def argcomplete_module():
    """argcomplete, or a one-line error naming the extra that brings it."""
    try:
        import argcomplete
    except ImportError:
        raise ConfigError(
            f"shell completion needs the Python package 'argcomplete', which comes with aiayn's optional "
            f"extra {EXTRA!r}: pip install 'aiayn[{EXTRA}]'"
        ) from None
    return argcomplete


def run(args: argparse.Namespace) -> int:
    print(argcomplete_module().shellcode(["aiayn"], shell=args.shell), end="")
    return 0
