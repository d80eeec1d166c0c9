"""`aiayn prepare CONFIG [--out RUN_DIR] [--set section.key=value ...]`: prepare the token store.

Does only what the first `aiayn train CONFIG` (or `aiayn lm train`) does before its first step:
stream the training corpus, train the tokenizer on its sample, encode, filter, and write the
token store into the cache directory (`data.cache_dir`, else `$AIAYN_CACHE`, else `.cache`
beside the run directory: `--out`'s parent, `runs/` by default), where every later run with the
same data and settings finds it. Prints the store's directory and its counts.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from aiayn.cli.options import add_progress_argument, add_set_option
from aiayn.core.errors import ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "prepare",
        help="prepare a config's token store (tokenizer + encoded training data) once",
        description="Stream the training data of CONFIG, train its tokenizer and write the "
        "memory-mapped token store that `aiayn train` / `aiayn lm train` then read.",
    )
    parser.add_argument("config", help="YAML config of a translation or language-model run")
    parser.add_argument("--out", type=Path, help="the run directory it is for (its cache sits beside it)")
    add_set_option(parser, "data.vocab_size=16000")
    add_progress_argument(parser, "a store of more than 500 pairs (50,000 characters for a language model)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from aiayn.core.progress_display import PreparationProgress
    from aiayn.data.token_store import cache_dir_for
    from aiayn.tasks import default_config_path, load_config
    from aiayn.training.data_settings import TokenStoreSettings
    from aiayn.training.run_dir import default_run_dir

    config = load_config(args.config, args.overrides)
    data = config.data
    if not isinstance(data, TokenStoreSettings) or data.kind not in ("translation", "lm"):
        raise ConfigError(f"data.task {data.task!r} ({data.kind}) has no token store to prepare")
    cache = cache_dir_for(data.cache_dir, args.out or default_run_dir(args.config or default_config_path()))
    unit = "pair" if data.kind == "translation" else "character"
    with PreparationProgress(args.progress, unit) as progress:
        if data.kind == "translation":
            from aiayn.translation.data import prepare_data

            store = prepare_data(data, cache_dir=cache, on_progress=progress.update).store
        else:
            from aiayn.lm.run import prepare_lm_data

            store = prepare_lm_data(data, cache_dir=cache, on_progress=progress.update).store
    manifest = store.manifest
    summary = {
        key: manifest[key] for key in ("num_pairs", "num_tokens", "filters", "corpora") if key in manifest
    }
    print(f"token store: {store.directory}")
    print(json.dumps(summary))
    return 0
