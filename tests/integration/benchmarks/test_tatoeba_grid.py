"""benchmarks/tatoeba_grid.sh resumes: a grid point whose result file exists is not trained again
(the runs take 30 minutes each), and the missing ones are. `aiayn` and Python are stand-ins that
log their arguments, so no training runs."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

STAND_IN = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "{log}"
if [[ $1 == benchmarks/tatoeba_summary.py && $2 == record ]]; then echo '{{"bleu": 1.0}}' > "$4"; fi
"""


def stand_in(path: Path, log: Path) -> Path:
    path.write_text(STAND_IN.format(log=log))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset (util-linux)")
def test_the_grid_skips_the_points_already_measured(tmp_path) -> None:
    log, out = tmp_path / "calls.log", tmp_path / "results"
    out.mkdir()
    done = out / "tatoeba_en_es_grid_small_8000_seed1.json"
    done.write_text('{"bleu": 30.0}\n')
    env = os.environ | {
        "STAGES": "grid", "AIAYN": str(stand_in(tmp_path / "aiayn", log)),
        "PY": str(stand_in(tmp_path / "python", log)), "RUNS": str(tmp_path / "runs"), "OUT": str(out),
    }  # fmt: skip
    finished = subprocess.run(
        ["bash", "benchmarks/tatoeba_grid.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert finished.returncode == 0, finished.stderr
    trained = sorted(line.split("--out ")[1].split()[0].rsplit("/", 1)[1]
                     for line in log.read_text().splitlines() if line.startswith("aiayn train"))  # fmt: skip
    assert trained == ["en_es_base_16000_seed1", "en_es_base_8000_seed1", "en_es_small_16000_seed1"]
    assert done.read_text() == '{"bleu": 30.0}\n'  # the finished point's result is left as it was
    assert "skipped (done)" in finished.stdout
    for name in ("base_16000", "base_8000", "small_16000"):
        assert (out / f"tatoeba_en_es_grid_{name}_seed1.json").exists()
