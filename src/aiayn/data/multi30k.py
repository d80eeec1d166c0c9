"""The Multi30k task-1 corpus (Elliott et al., 2016): finding, fetching and reading it.

Files are named ``{split}.{lang}.gz`` (an uncompressed ``{split}.{lang}`` is accepted too) and
are looked up, per language, in:

1. ``root`` (default ``data_root() / "multi30k"``, see :mod:`aiayn.data.paths`);
2. the download cache: ``multi30k/`` in the user's cache directory (``$AIAYN_CACHE_DIR``, else
   ``$XDG_CACHE_HOME/aiayn``, else ``~/.cache/aiayn``: :mod:`aiayn.core.user_cache`).

When a file is in neither and ``download=True``, it is fetched from :data:`MULTI30K_URL` into the
cache, through a temporary file renamed into place only once complete (so an interrupted
download never leaves a truncated corpus behind).
"""

import http.client
import os
import re
import tempfile
import urllib.request
from pathlib import Path

from aiayn.core.errors import DataError
from aiayn.core.user_cache import user_cache_dir
from aiayn.data.corpus import GZIP_MAGIC, read_parallel
from aiayn.data.paths import data_root

MULTI30K_URL = (
    "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{split}.{lang}.gz"
)
SPLITS = ("train", "val", "test_2016_flickr")
DOWNLOAD_TIMEOUT_S = 60
_LANG_RE = re.compile(r"[a-z]{2}")


def cache_dir() -> Path:
    """Where downloaded Multi30k files go (see the module docstring)."""
    return user_cache_dir() / "multi30k"


def _check(split: str, lang: str) -> None:
    if split not in SPLITS:
        raise DataError(f"unknown Multi30k split {split!r}; choose one of {', '.join(SPLITS)}")
    if not _LANG_RE.fullmatch(lang):
        raise DataError(f"bad Multi30k language code {lang!r}; expected e.g. 'en' or 'de'")


def find_file(split: str, lang: str, dirs: list[Path]) -> Path | None:
    """The first ``{split}.{lang}.gz`` or ``{split}.{lang}`` in ``dirs``, or None."""
    for directory in dirs:
        for name in (f"{split}.{lang}.gz", f"{split}.{lang}"):
            if (directory / name).is_file():
                return directory / name
    return None


def fetch(url: str, dest: Path) -> Path:
    """Fetch ``url`` to ``dest`` atomically (temporary file + rename); errors -> DataError."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=dest.name + ".", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with (
            os.fdopen(fd, "wb") as out,
            urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response,
        ):
            while chunk := response.read(1 << 20):
                out.write(chunk)
        with tmp.open("rb") as f:
            if f.read(2) != GZIP_MAGIC:
                raise DataError(f"download of {url} is not a gzip file")
        os.replace(tmp, dest)
    except (OSError, http.client.HTTPException) as err:  # URLError is an OSError
        raise DataError(f"cannot download {url} to {dest}: {err}") from err
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def multi30k_files(
    split: str,
    src_lang: str,
    tgt_lang: str,
    root: Path | None = None,
    download: bool = False,
) -> tuple[Path, Path]:
    """Paths of the source and target files of ``split``; see the module docstring."""
    root = Path(root) if root is not None else data_root() / "multi30k"
    dirs = [root, cache_dir()]
    paths = []
    for lang in (src_lang, tgt_lang):
        _check(split, lang)
        path = find_file(split, lang, dirs)
        url = MULTI30K_URL.format(split=split, lang=lang)
        if path is None and download:
            path = fetch(url, dirs[1] / f"{split}.{lang}.gz")
        if path is None:
            raise DataError(
                f"Multi30k file {split}.{lang}.gz not found in {dirs[0]} or {dirs[1]}; "
                f"download it from {url} (or pass download=True)"
            )
        paths.append(path)
    return paths[0], paths[1]


def load_multi30k(
    split: str,
    src_lang: str,
    tgt_lang: str,
    root: Path | None = None,
    download: bool = False,
) -> list[tuple[str, str]]:
    """The (source, target) sentence pairs of a Multi30k split."""
    src, tgt = multi30k_files(split, src_lang, tgt_lang, root=root, download=download)
    return read_parallel(src, tgt)
