"""`python slow_save.py SECONDS TRAIN_ARGS...`: `aiayn train TRAIN_ARGS`, except that every
checkpoint save pauses SECONDS once its temporary directory is complete and synced, just
before the rename that publishes it, so that a test can kill the run in the middle of a save.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from aiayn.cli.main import main
from aiayn.training import checkpoint


def pause_before_publishing(seconds: float) -> None:
    sync = checkpoint._fsync_dir

    def slow_sync(path: Path) -> None:
        sync(path)
        if checkpoint.LEFTOVER_PATTERN.match(Path(path).name):  # the temporary `.step_N.tmp-PID`
            time.sleep(seconds)

    checkpoint._fsync_dir = slow_sync


if __name__ == "__main__":
    pause_before_publishing(float(sys.argv[1]))
    sys.exit(main(["train", *sys.argv[2:]]))
