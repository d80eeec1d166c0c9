"""Training progress on stderr: plain lines for a log file (no carriage return, one line per
interval), a bar whose total is the run's budget, and the old `train.progress_bar` key."""

from __future__ import annotations

import io
import itertools
import json
import logging
import re
import time

import pytest
import yaml

from aiayn.cli.main import main
from aiayn.core.errors import ConfigError
from aiayn.tasks import config_from_dict
from training.conftest import tiny_config


class TimedFile(io.StringIO):
    """A file standing in for stderr (not a terminal) that notes when each line is written."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[float, str]] = []

    def write(self, text: str) -> int:
        self.lines += [(time.monotonic(), line) for line in text.splitlines() if line]
        return super().write(text)


def train(tmp_path, monkeypatch, stderr, **settings) -> dict:
    """`aiayn train` of the tiny copy task with stderr to `stderr`; its results.json."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(tiny_config(**settings)))
    monkeypatch.setattr("sys.stderr", stderr)
    assert main(["train", str(config), "--out", str(tmp_path / "run")]) == 0
    return json.loads((tmp_path / "run" / "results.json").read_text())


def test_stderr_to_a_file_gets_plain_lines_one_per_interval(tmp_path, monkeypatch):
    interval = 0.5
    stderr = TimedFile()
    results = train(tmp_path, monkeypatch, stderr, progress="auto", progress_every_s=interval,
                    max_steps=None, max_minutes=0.06, eval_every=10_000)  # a 3.6 s budget
    text = stderr.getvalue()
    assert "\r" not in text
    progress = [(at, line) for at, line in stderr.lines if line.startswith("train step")]
    ticks, last = progress[:-1], progress[-1]
    assert last[1].endswith("(done)") and "of 0:04 budget" in last[1]  # 3.6 s, shown rounded
    seconds = 60 * results["train_minutes"]
    assert 2 <= len(ticks) <= seconds / interval + 1
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(ticks)]
    assert all(gap >= 0.9 * interval for gap in gaps), gaps  # one line per interval, never more
    for _, line in progress:
        fields = r"% of .* \| loss [\d.]+ \| lr [\d.e+-]+ \| tok/s [\d,]+ \| elapsed \d+:\d\d \| ETA "
        assert re.search(fields, line), line


def test_a_budgeted_runs_bar_counts_its_budget(tmp_path, monkeypatch):
    import tqdm.auto

    bars = []

    class Recorded(tqdm.auto.tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            bars.append(self)

    monkeypatch.setattr(tqdm.auto, "tqdm", Recorded)
    train(tmp_path, monkeypatch, io.StringIO(), progress="bar", max_steps=1_000_000, max_minutes=0.04,
          eval_every=10_000)
    (bar,) = bars
    assert bar.total == pytest.approx(2.4)  # the budget in seconds, not the 1,000,000 steps
    assert bar.n >= 0.95 * bar.total  # the clock ended the run: the bar is (about) full


def test_the_old_progress_bar_key_is_read_with_a_warning(caplog):
    data = tiny_config()
    del data["train"]["progress"]
    for old, new in ((True, "auto"), (False, "none")):
        data["train"]["progress_bar"] = old
        with caplog.at_level(logging.WARNING, logger="aiayn"):
            assert config_from_dict(data).train.progress == new
        assert "train.progress_bar is now train.progress" in caplog.text
    data["train"]["progress"] = "plain"
    with pytest.raises(ConfigError, match="not both"):
        config_from_dict(data)


def test_the_dates_recipe_is_bounded_by_steps_and_a_clock_stop_gets_a_note(capsys):
    from aiayn.cli.train import print_guard_note
    from aiayn.tasks import default_config_path, load_config

    config = load_config(default_config_path(), [])
    train = config.train
    assert train.max_steps == 1500 and not train.schedule_follows_budget and train.max_minutes >= 30
    print_guard_note({"steps": 1500, "train_minutes": 2.5}, config)
    assert capsys.readouterr().out == ""
    print_guard_note({"steps": 900, "train_minutes": train.max_minutes}, config)
    note = capsys.readouterr().out
    assert note.count("\n") == 1 and "stopped the run at step 900 of 1,500" in note
