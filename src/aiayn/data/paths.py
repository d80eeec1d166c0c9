"""Where the data lives.

The data directory is, in order of preference:

1. ``$AIAYN_DATA_DIR`` when that environment variable is set (and non-empty);
2. ``../shared/data`` beside the repository root, the repository root being the nearest
   directory above this file that contains ``pyproject.toml``;
3. ``../shared/data`` relative to the current working directory (for installs that are not a
   source checkout).

The directory is only computed here, never created or checked.
"""

import os
from pathlib import Path


def repo_root() -> Path | None:
    """Return the nearest directory above this file that holds ``pyproject.toml``, if any."""
    for parent in Path(__file__).resolve().parents:
        if (parent / "pyproject.toml").is_file():
            return parent
    return None


def data_root() -> Path:
    """Return the data directory (see the module docstring for the lookup order)."""
    env = os.environ.get("AIAYN_DATA_DIR")
    if env:
        return Path(env).expanduser()
    root = repo_root()
    base = root if root is not None else Path.cwd()
    return (base / ".." / "shared" / "data").resolve()
