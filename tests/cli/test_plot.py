"""`aiayn plot positional | schedule | curves`: each writes its picture; bad input is a clear error."""

from __future__ import annotations

import json

import numpy as np
import pytest

from aiayn.cli.main import main
from aiayn.core.errors import ConfigError
from aiayn.plots.positional import default_dimensions, positional_figure
from aiayn.plots.schedule import schedule_configs, schedule_figure
from aiayn.training.schedule import noam_lr
from plots.helpers import assert_png_not_blank, assert_svg_has_content


def test_positional_png_and_svg(tmp_path):
    png, svg = tmp_path / "pe.png", tmp_path / "pe.svg"
    assert main(["plot", "positional", "--d-model", "64", "--max-len", "50", "--out", str(png)]) == 0
    assert_png_not_blank(png)
    assert main(["plot", "positional", "--d-model", "32", "--max-len", "20", "--out", str(svg)]) == 0
    assert_svg_has_content(svg)


def test_positional_draws_the_sinusoidal_table():
    figure = positional_figure(16, 30, dims=[0, 5])
    sin_image, cos_image = figure.axes[0].images[0], figure.axes[1].images[0]
    i = np.arange(8)
    pos = np.arange(30, dtype=np.float64)[:, None]
    np.testing.assert_allclose(sin_image.get_array(), np.sin(pos / 10000 ** (2 * i / 16)), atol=1e-6)
    np.testing.assert_allclose(cos_image.get_array(), np.cos(pos / 10000 ** (2 * i / 16)), atol=1e-6)
    lines = figure.axes[2].get_lines()
    assert len(lines) == 2
    np.testing.assert_allclose(lines[1].get_ydata(), np.cos(pos[:, 0] / 10000 ** (4 / 16)), atol=1e-6)


def test_positional_default_dimensions_are_valid():
    for d_model in (2, 4, 16, 64, 512):
        dims = default_dimensions(d_model)
        assert dims and all(0 <= d < d_model for d in dims)


def test_schedule_png_single_and_repeated(tmp_path):
    out = tmp_path / "schedule.png"
    assert main(["plot", "schedule", "--d-model", "512", "--warmup", "4000", "--out", str(out)]) == 0
    assert_png_not_blank(out)
    svg = tmp_path / "schedule.svg"
    args = ["plot", "schedule", "--d-model", "256", "--warmup", "100", "--d-model", "1024", "--warmup", "200"]
    assert main([*args, "--steps", "1000", "--out", str(svg)]) == 0
    assert_svg_has_content(svg)


def test_schedule_configs_and_drawn_values():
    assert schedule_configs([512], [4000]) == [(512, 4000), (512, 8000), (256, 4000)]
    assert schedule_configs([256, 512], [100]) == [(256, 100), (512, 100)]
    assert schedule_configs([], []) == [(512, 4000), (512, 8000), (256, 4000)]
    with pytest.raises(ConfigError, match="same number"):
        schedule_configs([1, 2], [3, 4, 5])
    with pytest.raises(ConfigError, match="--warmup"):
        schedule_configs([512], [0])
    figure = schedule_figure([(64, 10)], steps=100)
    curve = figure.axes[0].get_lines()[0]
    for step, value in zip(curve.get_xdata(), curve.get_ydata(), strict=True):
        assert value == pytest.approx(noam_lr(int(step), 64, 10))
    assert max(curve.get_ydata()) == pytest.approx(64**-0.5 * 10**-0.5)


def write_metrics(run_dir, records):
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def fake_run(run_dir, scale: float, bleu: bool = True, seconds_per_step: float | None = None):
    records = []
    for step in range(1, 101):
        records.append({"step": step, "split": "train", "loss": scale * 5 / step**0.3, "lr": 1e-3})
        if seconds_per_step is not None:
            records[-1]["elapsed_s"] = step * seconds_per_step
        if step % 25 == 0:
            val = {"step": step, "split": "val", "loss": scale * 4 / step**0.3, "ppl": 2.0}
            if seconds_per_step is not None:
                val["elapsed_s"] = step * seconds_per_step + 1.5
            if bleu:
                val["bleu"] = step / 4 / scale
            records.append(val)
    write_metrics(run_dir, records)
    return run_dir


def test_curves_several_runs(tmp_path):
    a, b = fake_run(tmp_path / "base", 1.0), fake_run(tmp_path / "big", 0.8, bleu=False)
    out = tmp_path / "curves.png"
    assert main(["plot", "curves", str(a), str(b), "--out", str(out)]) == 0
    assert_png_not_blank(out)
    svg = tmp_path / "curves.svg"
    assert main(["plot", "curves", str(b / "metrics.jsonl"), "--out", str(svg)]) == 0
    assert_svg_has_content(svg)


def test_curves_read_the_logged_values(tmp_path):
    from aiayn.plots.curves import curves_figure, read_run

    run = read_run(fake_run(tmp_path / "r", 1.0))
    assert len(run.train_loss) == 100 and len(run.val_loss) == 4 and len(run.val_bleu) == 4
    figure = curves_figure([run])
    loss_lines = figure.axes[0].get_lines()
    assert list(loss_lines[0].get_ydata()) == [p.value for p in run.train_loss]
    assert list(figure.axes[1].get_lines()[0].get_xdata()) == [25, 50, 75, 100]


def test_curves_against_minutes(tmp_path, capsys):
    from aiayn.plots.curves import curves_figure, read_run

    slow = read_run(fake_run(tmp_path / "slow", 1.0, seconds_per_step=6.0))
    fast = read_run(fake_run(tmp_path / "fast", 1.0, seconds_per_step=3.0))
    figure = curves_figure([slow, fast], x="minutes")
    assert figure.axes[0].get_xlabel() == figure.axes[1].get_xlabel() == "minutes since the run started"
    slow_bleu, fast_bleu = figure.axes[1].get_lines()
    # The same steps land at each run's own minutes: the slow run's validations twice as late.
    assert list(slow_bleu.get_xdata()) == pytest.approx([(s * 6.0 + 1.5) / 60 for s in (25, 50, 75, 100)])
    assert list(fast_bleu.get_xdata()) == pytest.approx([(s * 3.0 + 1.5) / 60 for s in (25, 50, 75, 100)])
    assert list(figure.axes[0].get_lines()[0].get_xdata()) == pytest.approx([s / 10 for s in range(1, 101)])
    out = tmp_path / "minutes.png"
    assert main(["plot", "curves", str(tmp_path / "slow"), str(tmp_path / "fast"), "--x", "minutes",
                 "--out", str(out)]) == 0
    assert_png_not_blank(out)
    # A metrics file without elapsed_s (written before it was logged) can only be drawn by steps.
    old = fake_run(tmp_path / "old", 1.0)
    assert main(["plot", "curves", str(old), "--x", "minutes", "--out", str(tmp_path / "o.png")]) == 2
    err = capsys.readouterr().err
    assert "old" in err and "step 1 has no elapsed_s" in err and "Traceback" not in err
    assert not (tmp_path / "o.png").exists()


def test_curves_errors(tmp_path, capsys):
    assert main(["plot", "curves", str(tmp_path / "nope"), "--out", str(tmp_path / "c.png")]) == 2
    assert "nope" in capsys.readouterr().err
    bad = tmp_path / "bad"
    write_metrics(bad, [{"step": 1, "split": "train", "loss": 1.0}])
    with (bad / "metrics.jsonl").open("a") as handle:
        handle.write("{not json\n")
    assert main(["plot", "curves", str(bad), "--out", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert "line 2" in err and "metrics.jsonl" in err and "Traceback" not in err
    empty = tmp_path / "empty"
    write_metrics(empty, [])
    assert main(["plot", "curves", str(empty), "--out", str(tmp_path / "c.png")]) == 2
    assert "no training or validation loss" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["plot", "positional", "--out", "pe.pdf"], "unsupported extension '.pdf'"),
        (["plot", "positional", "--out", "pe"], "unsupported extension '(none)'"),
        (["plot", "positional", "--d-model", "1", "--out", "pe.png"], "--d-model: must be an integer >= 2"),
        (
            ["plot", "positional", "--d-model", "8", "--dims", "9", "--out", "pe.png"],
            "--dims [9] out of range",
        ),
        (["plot", "schedule", "--warmup", "-1", "--out", "s.png"], "--warmup: must be an integer >= 1"),
        (["plot", "schedule", "--steps", "1", "--out", "s.png"], "--steps: must be an integer in [2, "),
    ],
)
def test_bad_arguments_are_clear_errors(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # nothing written
