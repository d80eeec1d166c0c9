"""The user's cache directory: what aiayn keeps between runs for one user, in one home.

`$AIAYN_CACHE_DIR` when set, else `$XDG_CACHE_HOME/aiayn` (the XDG base-directory convention),
else `~/.cache/aiayn`. Under it each kind of kept file has its own folder: `multi30k/` (the
downloaded corpus, `aiayn.data.multi30k`) and `steps/` (kept compiled decoding steps,
`aiayn.runtime.kept_store`; `aiayn cache list` and `aiayn cache clear` show and remove them).
Token stores are not here: they follow the run (`data.cache_dir`, `$AIAYN_CACHE`).
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_DIR_ENV = "AIAYN_CACHE_DIR"


def user_cache_dir() -> Path:
    """`$AIAYN_CACHE_DIR`, else `$XDG_CACHE_HOME/aiayn`, else `~/.cache/aiayn` (see the module doc)."""
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "aiayn"
    return Path.home() / ".cache" / "aiayn"
