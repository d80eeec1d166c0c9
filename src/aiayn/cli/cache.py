"""`aiayn cache list|clear`: what aiayn keeps in the user's cache directory between runs.

    aiayn cache list                 # every kept decoding step: size, model, when built
    aiayn cache clear                # remove them all (they are built again when needed)
    aiayn cache clear --stale        # only those this machine cannot use (another torch, CPU, ...)

The user's cache directory is `$AIAYN_CACHE_DIR`, else `$XDG_CACHE_HOME/aiayn`, else
`~/.cache/aiayn` (`aiayn.core.user_cache`). Its `steps/` folder holds the kept compiled decoding
steps (`aiayn translate --compile`, `aiayn.runtime.kept`), one folder per model, torch version,
CPU and thread count, one file per variant of the step.
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cache", help="list or clear the kept compiled decoding steps",
        description="List or clear what aiayn keeps in the user's cache directory ($AIAYN_CACHE_DIR, "
        "else $XDG_CACHE_HOME/aiayn, else ~/.cache/aiayn): the compiled decoding steps that "
        "--compile builds once per model, torch version and CPU.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list", help="show each kept step: size, model, build",
        description="Show each kept decoding step (one line per file) and their total size.",
    )
    listing.set_defaults(func=run_list)
    clearing = actions.add_parser(
        "clear", help="remove kept steps (built again when needed)",
        description="Remove the kept decoding steps; --compile builds them again when needed.",
    )
    clearing.add_argument("--stale", action="store_true", help="only those this machine cannot use "
                          "(another torch version, CPU or thread count)")
    clearing.set_defaults(func=run_clear)


def megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def run_list(args: argparse.Namespace) -> int:
    from aiayn.runtime.kept_store import KERNELS, kept_entries, steps_dir, tree_size

    entries = kept_entries()
    kernels = tree_size(steps_dir() / KERNELS) if (steps_dir() / KERNELS).is_dir() else 0
    total = sum(entry.size for entry in entries) + kernels
    print(f"{steps_dir()}: {len(entries)} kept decoding step file(s), {megabytes(total)} with their "
          f"compiled kernels ({KERNELS}/: {megabytes(kernels)})")
    folder = None
    for entry in entries:
        if entry.path.parent != folder:
            folder = entry.path.parent
            header = entry.header or {}
            key = header.get("key") or {}
            print(f"  {folder.name}/  {header.get('label') or '(unnamed model)'}, {key.get('runtime', '?')}, "
                  f"torch {key.get('torch', '?')}, {key.get('threads', '?')} thread(s)")
        size = f"    {megabytes(entry.size):>9}  {entry.path.name:<20}"
        if entry.header is None:
            print(f"{size} unreadable (aiayn cache clear removes it)")
            continue
        unusable = "; ".join(entry.differences())
        built = f"built {entry.header.get('built', '?')[:16]} in {entry.header.get('build_s')} s"
        print(f"{size} {built}" + (f"  [not usable here: {unusable}]" if unusable else ""))
    return 0


def run_clear(args: argparse.Namespace) -> int:
    from aiayn.runtime.kept_store import clear_steps, steps_dir

    files, freed = clear_steps(only_stale=args.stale)
    what = "stale kept decoding step" if args.stale else "kept decoding step"
    print(f"removed {files} {what} file(s), {megabytes(freed)}, from {steps_dir()}")
    return 0
