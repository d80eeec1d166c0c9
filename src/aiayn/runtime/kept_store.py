"""Where kept decoding steps live on disk, and what keeps them honest.

A kept step (`aiayn.runtime.kept`) is generated code for one model on one machine: it is valid
only for the same weights, the same PyTorch, the same processor features, the same number of
threads, the same runtime (float32 or int8) and the same aiayn source of the model and runtime
modules it was traced from. All of these make its *key* (`step_key`); the key's digest names its
folder, `steps/<digest>/` in the user's cache directory (`aiayn.core.user_cache`), one file per
variant of the step (`<variant>.step`); `steps/kernels/` holds the C++ kernels they load (Inductor's
cache while a step builds and loads: without it a load compiles them again), shared by all.

Each file is self-describing: a magic line, a JSON header (the full key, the variant, the payload's
size and sha256, the build's seconds and date, the model it was built for) and the payload, the
serialized compiled function. Reading checks all of it:

- a file whose header names another key (other weights, torch version, CPU) is never used
  (`StaleArtifact`): the step is built again and replaces it;
- a file cut short or altered (`DamagedArtifact`) gets a one-line warning and is built again;
- writes are atomic (`aiayn.core.files.atomic_write`), and a builder holds an exclusive lock on
  the folder (`build_lock`) from its look-up to its write, so two processes building at once
  leave one valid file: the second finds the first's and loads it.

`kept_entries` lists what is kept (for `aiayn cache list`), `clear_steps` removes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from aiayn.core.files import atomic_write
from aiayn.core.user_cache import user_cache_dir
from aiayn.runtime.cpu import cpu_info

MAGIC = b"aiayn kept decoding step 1\n"
SUFFIX = ".step"
LOCK_FILE = ".lock"
KERNELS = "kernels"
"""The folder, beside the steps' own, of their compiled kernels (Inductor's cache while a step
builds and loads)."""


class StaleArtifact(Exception):
    """A kept step made for another key (weights, torch, CPU, threads, source): never used."""


class DamagedArtifact(Exception):
    """A kept step file that cannot be read back whole (truncated, altered, unreadable)."""


def steps_dir() -> Path:
    """`steps/` in the user's cache directory: every kept step of this user."""
    return user_cache_dir() / "steps"


def model_fingerprint(model: nn.Module) -> str:
    """sha256 of a model's parameters and buffers (names, dtypes, shapes, bytes): a changed
    weight file changes it."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(tensor.view(-1).view(torch.uint8).numpy() if tensor.numel() else b"")
    return digest.hexdigest()


def source_fingerprint() -> str:
    """sha256 of the aiayn modules a step is traced from (`aiayn.model`, `aiayn.runtime`): the
    generated code follows their source, so another aiayn version keeps its own steps."""
    import aiayn.model

    digest = hashlib.sha256()
    for folder in (Path(aiayn.model.__file__).parent, Path(__file__).parent):  # model/, runtime/
        for path in sorted(folder.glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def machine_fields() -> dict[str, Any]:
    """The parts of a key that the machine and process decide: torch version, processor and
    its feature flags, intra-op threads (the generated loops are specialised to them)."""
    info = cpu_info()
    return {
        "torch": torch.__version__,
        "cpu": info.model,
        "cpu_flags": hashlib.sha256(" ".join(sorted(info.flags)).encode()).hexdigest()[:16],
        "threads": torch.get_num_threads(),
    }


def step_key(model: nn.Module, quantize: str | None) -> dict[str, Any]:
    """Everything a kept step of `model` depends on (see the module doc)."""
    config = model.config  # type: ignore[union-attr]
    settings = asdict(config) if is_dataclass(config) else vars(config)
    return {
        "model": model_fingerprint(model),
        "config": hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16],
        "runtime": quantize or "float32",
        "source": source_fingerprint()[:16],
        **machine_fields(),
    }


def key_digest(key: dict[str, Any]) -> str:
    """The folder name of `key`'s steps."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]


def read_artifact(path: Path, key: dict[str, Any]) -> tuple[dict[str, Any], bytes] | None:
    """(header, payload) of the kept step at `path`; None when there is none. Raises
    `StaleArtifact` when it was made for another key, `DamagedArtifact` when it is not whole."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise DamagedArtifact(f"cannot read it ({error.strerror})") from None
    if not data.startswith(MAGIC):
        raise DamagedArtifact("it does not start as a kept step does")
    line_end = data.find(b"\n", len(MAGIC))
    try:
        header = json.loads(data[len(MAGIC):line_end])
        size, checksum = int(header["bytes"]), str(header["sha256"])
    except (ValueError, KeyError, TypeError):
        raise DamagedArtifact("its header is unreadable") from None
    if header.get("key") != key:
        different = sorted(k for k in key if (header.get("key") or {}).get(k) != key[k])
        raise StaleArtifact(f"it was made for another {', '.join(different) or 'key'}")
    payload = data[line_end + 1:] if line_end >= 0 else b""
    if len(payload) != size:
        raise DamagedArtifact(f"it holds {len(payload)} of its {size} bytes (truncated)")
    if hashlib.sha256(payload).hexdigest() != checksum:
        raise DamagedArtifact("its content does not match its checksum")
    return header, payload


def write_artifact(
    path: Path, key: dict[str, Any], variant: str, payload: bytes, build_s: float, label: str | None,
) -> None:
    """Write a kept step atomically (the header as `read_artifact` checks it, then `payload`)."""
    header = {
        "key": key, "variant": variant, "bytes": len(payload), "sha256": hashlib.sha256(payload).hexdigest(),
        "build_s": round(build_s, 2), "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "label": label,
    }
    line = json.dumps(header, sort_keys=True).encode() + b"\n"

    def write(tmp: Path) -> None:
        tmp.write_bytes(MAGIC + line + payload)

    atomic_write(path, write)


@contextlib.contextmanager
def build_lock(directory: Path) -> Iterator[None]:
    """Hold `directory`'s exclusive lock (made if missing) while the block looks up, builds and
    writes; another process's block waits for it."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / LOCK_FILE, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@dataclass(frozen=True)
class KeptEntry:
    """One kept step file as `aiayn cache list` shows it; `header` None when unreadable."""

    path: Path
    size: int
    header: dict[str, Any] | None

    @property
    def usable_here(self) -> bool:
        """Whether this machine and process could use it (torch, CPU, threads as its key's)."""
        return self.header is not None and not self.differences()

    def differences(self) -> list[str]:
        """What of this machine and process differs from the step's key: 'threads 1, here 2'."""
        key = (self.header or {}).get("key") or {}
        return [f"{name} {key.get(name)}, here {value}" for name, value in machine_fields().items()
                if key.get(name) != value]


def kept_entries(root: Path | None = None) -> list[KeptEntry]:
    """Every kept step file under `root` (default `steps_dir()`), oldest folder first."""
    root = steps_dir() if root is None else root
    entries = []
    for path in sorted(root.glob(f"*/*{SUFFIX}"), key=lambda p: (p.parent.stat().st_mtime, p.name)):
        header = None
        with contextlib.suppress(OSError, ValueError), open(path, "rb") as handle:
            if handle.read(len(MAGIC)) == MAGIC:
                header = json.loads(handle.readline())
        entries.append(KeptEntry(path, path.stat().st_size, header))
    return entries


def tree_size(folder: Path) -> int:
    """Bytes of the files under `folder` (the kernels, for `aiayn cache list`)."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def clear_steps(root: Path | None = None, only_stale: bool = False) -> tuple[int, int]:
    """Remove kept steps under `root` (default `steps_dir()`): all, or (`only_stale`) those this
    machine cannot use. Returns (files removed, bytes freed). Folders left empty go too."""
    root = steps_dir() if root is None else root
    files = freed = 0
    for entry in kept_entries(root):
        if only_stale and entry.usable_here:
            continue
        entry.path.unlink(missing_ok=True)
        files, freed = files + 1, freed + entry.size
    for folder in root.glob("*") if root.is_dir() else []:
        if folder.name == KERNELS and (only_stale or any(root.glob(f"*/*{SUFFIX}"))):
            continue  # shared by the steps left
        if folder.is_dir() and not any(folder.glob(f"*{SUFFIX}")):
            freed += tree_size(folder)
            shutil.rmtree(folder, ignore_errors=True)
    if root.is_dir() and not any(root.iterdir()):
        os.rmdir(root)
    return files, freed
