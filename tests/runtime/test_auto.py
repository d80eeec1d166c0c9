"""`compile='auto'` (`aiayn.runtime.auto`, `aiayn.runtime.accelerate`): a kept step where one
exists, else eager, switching to a built step only when the sentences left make it pay; and the
--compile / --no-compile options that choose it."""

import shutil

import pytest

import aiayn
from aiayn.cli.main import build_parser
from aiayn.decoding import greedy_search
from aiayn.runtime import auto
from aiayn.runtime.auto import DEFAULT_BUILD_S, VARIANTS_PER_DECODE, AutoStep, build_estimate, pays_to_build
from aiayn.runtime.kept import kept_directory
from aiayn.runtime.kept_store import MAGIC, write_artifact
from aiayn.runtime.steps import EagerStep, PrepackedStep
from decoding.helpers import source_batch
from threads import one_thread  # noqa: F401 (autouse)


def test_building_pays_when_the_eager_time_left_saves_more_than_the_build():
    # 1 s a sentence, 1,000 left: compiling saves 100 s, more than a 60 s build; 100 left: 10 s.
    assert pays_to_build(eager_s=10.0, done=10, left=1000, build_s=60.0)
    assert not pays_to_build(eager_s=10.0, done=10, left=100, build_s=60.0)
    assert not pays_to_build(eager_s=0.0, done=0, left=10**6, build_s=1.0)  # nothing measured yet


def test_the_build_estimate_reads_what_kept_steps_recorded(model_dir, tmp_path):
    model = aiayn.load(model_dir, "cpu").model
    key, _ = kept_directory(model, None, tmp_path)
    assert build_estimate(key, tmp_path) == VARIANTS_PER_DECODE * DEFAULT_BUILD_S  # nothing kept
    other = dict(key, config="another model")
    write_artifact(tmp_path / "a" / "beam-one.step", other, "beam-one", b"x", 30.0, None)
    assert build_estimate(key, tmp_path) == VARIANTS_PER_DECODE * 30.0  # the slowest of any model
    write_artifact(tmp_path / "b" / "beam-one.step", key, "beam-one", b"x", 8.0, None)
    write_artifact(tmp_path / "b" / "beam-many.step", key, "beam-many", b"x", 12.0, None)
    assert build_estimate(key, tmp_path) == VARIANTS_PER_DECODE * 10.0  # this model's own, averaged


@pytest.mark.parametrize("pays", [True, False])
def test_the_auto_step_switches_at_a_new_batch_only_when_it_pays(model_dir, monkeypatch, pays):
    """Eager while it measures; at the next batch, the kept step (here a stand-in runner) if the
    sentences left pay for the build, else eager to the end; outputs the same either way."""
    model = aiayn.load(model_dir, "cpu").model
    monkeypatch.setattr(auto, "MEASURE_S", 0.0)
    made = []
    stand_in = EagerStep(model)
    runner = AutoStep(model, None, sentences=10**6, build_s=1e-9 if pays else 1e9,
                      make_kept=lambda: made.append(1) or stand_in)
    src = source_batch([4, 2, 5], vocab_size=model.config.src_vocab_size)
    first = greedy_search(runner, src, 8).tokens
    assert isinstance(runner.current, PrepackedStep) and runner.eager_s > 0
    second = greedy_search(runner, src, 8).tokens
    assert first == second
    assert made == ([1] if pays else [])
    assert (runner.current is stand_in) == pays and runner.network is runner.current.network


def test_auto_takes_a_kept_step_else_eager(model_dir, tmp_path, monkeypatch):
    """No kept step: eager (the sentences unknown or few to measure) or `AutoStep` (the count
    given); a kept step: `KeptStep` that loads what is kept and never builds."""
    monkeypatch.setattr("aiayn.runtime.compiled.compiler_available", lambda: True)
    assert isinstance(aiayn.load(model_dir, "cpu", compile="auto").runner, PrepackedStep)
    assert isinstance(aiayn.load(model_dir, "cpu", compile="auto", sentences=5000).runner, AutoStep)
    assert isinstance(aiayn.load(model_dir, "cpu", compile=False, sentences=5000).runner, PrepackedStep)
    model = aiayn.load(model_dir, "cpu").model
    _, folder = kept_directory(model, None)  # under this test's own user cache directory
    folder.mkdir(parents=True)
    (folder / "beam-one.step").write_bytes(MAGIC)  # any kept variant: the model has a kept step
    runner = aiayn.load(model_dir, "cpu", compile="auto", sentences=5000).runner
    assert type(runner).__name__ == "KeptStep" and runner.build is False
    shutil.rmtree(folder)


def test_language_models_stay_eager_under_auto():
    """auto applies where compiling can: never an error for models it does not compile."""
    from aiayn.model import DecoderOnlyLM
    from decoding.helpers import tiny_lm

    lm = tiny_lm()
    runner = aiayn.runtime.accelerate(lm, None, "auto", sentences=10**6)
    assert isinstance(runner, PrepackedStep) and isinstance(runner.model, DecoderOnlyLM)


@pytest.mark.parametrize(("argv", "expected"), [
    ([], "auto"), (["--compile"], "always"), (["--no-compile"], "never"), (["--compile", "auto"], "auto"),
    (["--compile", "never"], "never"),
])
@pytest.mark.parametrize("command", ["translate", "evaluate", "serve"])
def test_compile_options(command, argv, expected):
    required = {"translate": [], "evaluate": ["--input", "a", "--ref", "b"], "serve": []}[command]
    args = build_parser().parse_args([command, "--model", "m", *required, *argv])
    assert args.compile == expected


def test_translate_tells_auto_how_many_lines_it_will_decode(model_dir, tmp_path, monkeypatch, capsys):
    """`aiayn translate --input FILE` loads with the file's line count (what auto weighs)."""
    import aiayn.inference as inference
    from aiayn.cli.main import main

    given = []
    load = inference.load
    monkeypatch.setattr(inference, "load", lambda *a, **options: given.append(options) or load(*a, **options))
    lines = tmp_path / "in.txt"
    lines.write_text("ja\nzwei katzen\nja\n")
    assert main(["translate", "--model", str(model_dir), "--input", str(lines), "--beam", "1"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    assert [(o["compile"], o["sentences"]) for o in given] == [("auto", 3)]
