"""Where the data lives.

The data directory is, in order of preference:

1. ``$AIAYN_DATA_DIR`` when that environment variable is set (and non-empty);
2. ``../shared/data`` beside the repository root, the repository root being the nearest
   directory above this file that contains ``pyproject.toml``;
3. ``../shared/data`` relative to the current working directory (for installs that are not a
   source checkout).

The directory is only computed here, never created or checked. `resolve_data_file` finds a
file named in a config either as given or relative to the data root.
"""

import os
from pathlib import Path

from aiayn.core.errors import DataError


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


def resolve_data_file(name: str | Path, what: str = "file") -> Path:
    """`name` as given when it exists, else relative to the data root.

    A missing file raises `DataError` ("`what` not found: ..."), naming both places looked in; a
    directory, "`what` is a directory, not a file: ...".
    """
    path = Path(name).expanduser()
    if path.is_file():
        return path.resolve()
    root = data_root()
    if not path.is_absolute() and (root / path).is_file():
        return (root / path).resolve()
    if path.is_dir():
        raise DataError(f"{what} is a directory, not a file: {name}")
    where = f" (nor under the data root {root})" if not path.is_absolute() else ""
    raise DataError(f"{what} not found: {name}{where}")
