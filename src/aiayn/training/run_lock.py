"""One writer per run directory: an advisory lock held for the life of a training process.

Two processes writing checkpoints and `metrics.jsonl` into one run directory corrupt it
(interleaved and duplicated rows, checkpoints of two runs). So the process that trains into
`RUN_DIR` holds an exclusive `fcntl.flock` on `RUN_DIR/.train.lock`, taken as soon as the
directory is prepared and before any data or tokenizer work; a second `aiayn ... train` into
it (fresh, `--resume` or `--overwrite`), or `aiayn average RUN_DIR --out RUN_DIR`, is refused
with one line naming the holder's PID. The kernel releases the lock when the process exits,
however it dies (a SIGKILLed run leaves no stale lock: the next `--resume` just takes it); the
file itself stays (deleting a lock file races with processes about to lock it). Under torchrun
only rank 0 takes it. Readers (`translate`, `evaluate`, `plot`, `explore`) never look at it.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path
from types import TracebackType
from typing import TextIO

from aiayn.core.errors import RunDirInUseError

LOCK_FILE = ".train.lock"
HOLDER_WAIT_S = 1.0  # how long to wait for a new holder to write its PID into the file


class RunDirLock:
    """The held lock on a run directory; `release()` (or leaving a `with` block) lets it go.

    The lock belongs to the open file: it is released when this object is released or
    garbage-collected, or when the process ends.
    """

    def __init__(self, run_dir: Path, handle: TextIO) -> None:
        self.run_dir = Path(run_dir)
        self._handle: TextIO | None = handle

    @classmethod
    def acquire(cls, run_dir: str | Path) -> RunDirLock:
        """Take the lock on existing directory `run_dir`, or raise `RunDirInUseError` naming
        the process that holds it."""
        run_dir = Path(run_dir)
        handle = open(run_dir / LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115 - held open
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(handle)
            handle.close()
            raise RunDirInUseError(
                f"run directory {run_dir} is in use by {holder}, which is training into it; "
                "wait for it to finish or stop it first"
            ) from None
        except OSError:
            handle.close()
            raise
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()} {socket.gethostname()}\n")
        handle.flush()
        return cls(run_dir, handle)

    def release(self) -> None:
        """Let the lock go (closing the file releases it)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __del__(self) -> None:
        self.release()

    def __enter__(self) -> RunDirLock:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.release()


def _read_holder(handle: TextIO) -> str:
    """'process PID (on HOST)' from a lock file another process holds (it may be writing it)."""
    deadline = time.monotonic() + HOLDER_WAIT_S
    while True:
        handle.seek(0)
        fields = handle.read().split()
        if len(fields) >= 2 and fields[0].isdigit():
            pid, host = fields[0], fields[1]
            where = "" if host == socket.gethostname() else f" on {host}"
            return f"process {pid}{where}"
        if time.monotonic() > deadline:
            return "another process"
        time.sleep(0.05)
