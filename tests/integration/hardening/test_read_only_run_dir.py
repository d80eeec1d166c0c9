"""A run directory on a read-only file system (a tmpfs remounted read-only): `aiayn train` fails at
start with a clear one-line error, before any data or training work. Skipped, with the reason, where
this machine cannot mount."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from aiayn.cli.main import main

from .conftest import write_config


@pytest.fixture
def read_only_dir(tmp_path):
    directory = tmp_path / "ro"
    directory.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("a read-only run directory needs `mount` (a tmpfs remounted read-only)")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(directory)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"this machine cannot mount a tmpfs to remount read-only: {mounted.stderr.strip()}")
    try:
        (directory / "run").mkdir()  # an existing, empty run directory
        remount = subprocess.run(["mount", "-o", "remount,ro", str(directory)], capture_output=True,
                                 text=True)
        if remount.returncode != 0:
            pytest.skip(f"this machine cannot remount read-only: {remount.stderr.strip()}")
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


@pytest.mark.parametrize("where", ["existing", "new"])
def test_a_read_only_run_directory_is_a_clear_error_at_start(read_only_dir, tmp_path, capsys, where):
    run_dir = read_only_dir / ("run" if where == "existing" else "new_run")
    code = main(["train", str(write_config(tmp_path / "c.yaml")), "--out", str(run_dir)])
    err = capsys.readouterr().err
    assert code == 2, err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert "Traceback" not in err and len(errors) == 1, err  # (the line before names the run directory)
    assert errors[0].startswith(f"aiayn train: error: run directory {run_dir} is not writable"), err
    assert "Read-only file system" in errors[0], err
    assert sorted(p.name for p in read_only_dir.iterdir()) == ["run"]  # nothing made
