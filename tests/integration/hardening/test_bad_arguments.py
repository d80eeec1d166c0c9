"""Every numeric command-line option and config value is checked where it is read: NaN,
infinity and out-of-range values give one line naming the option, exit status 2."""

from __future__ import annotations

import argparse
import math
import re

import pytest

from aiayn.cli.arguments import bounded_int, finite_float
from aiayn.cli.main import build_parser, main
from aiayn.core.errors import ConfigError
from aiayn.core.ranges import Range
from aiayn.tasks import load_config

from .conftest import make_model_dir


def run_cli(capsys, argv: list[str]) -> tuple[int, str]:
    """Exit status and stderr of `aiayn ARGV` (bad arguments return 2, as any bad input)."""
    code = main(argv)
    return code, capsys.readouterr().err


def assert_one_line_naming(err: str, *names: str) -> None:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for name in names:
        assert name in lines[0], err


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_model_dir(tmp_path_factory.mktemp("model") / "model")


# ------------------------------------------------------------------ the cases
@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["translate", "--model", "{model}", "--text", "a", "--alpha", "nan"], "--alpha"),
        (["translate", "--model", "{model}", "--text", "a", "--alpha", "inf"], "--alpha"),
        (["translate", "--model", "{model}", "--text", "a", "--alpha=-inf"], "--alpha"),
        (["evaluate", "--model", "{model}", "--input", "x", "--ref", "y", "--alpha", "nan"], "--alpha"),
        (["lm", "generate", "--model", "{model}", "--temperature", "nan"], "--temperature"),
        (["lm", "generate", "--model", "{model}", "--temperature", "-1"], "--temperature"),
        (["lm", "generate", "--model", "{model}", "--top-p", "inf"], "--top-p"),
        (["lm", "generate", "--model", "{model}", "--top-p", "0"], "--top-p"),
        (["lm", "generate", "--model", "{model}", "--top-k", "0"], "--top-k"),
        (["lm", "generate", "--model", "{model}", "--max-new-tokens", "-1"], "--max-new-tokens"),
        (["plot", "schedule", "--scale", "nan", "--out", "s.png"], "--scale"),
        (["plot", "schedule", "--warmup", "0", "--out", "s.png"], "--warmup"),
        (["plot", "positional", "--d-model", "1", "--out", "p.png"], "--d-model"),
        (["explore", "--model", "{model}", "--input", "x", "--out", "e.html", "--beam", "0"], "--beam"),
        (["translate", "--model", "{model}", "--text", "a", "--batch-tokens", "0"], "--batch-tokens"),
        (["translate", "--model", "{model}", "--text", "a", "--chunk-lines", "0"], "--chunk-lines"),
        (["average", "run", "--out", "avg", "--last", "0"], "--last"),
    ],
)
def test_bad_numeric_option_is_one_line_naming_it(capsys, model_dir, argv, option):
    argv = [a.replace("{model}", str(model_dir)) for a in argv]
    code, err = run_cli(capsys, argv)
    assert code == 2
    assert_one_line_naming(err, f"argument {option}: must be")


@pytest.mark.parametrize("beam", ["0", "-3"])
def test_bad_beam_names_the_beam_not_nbest(capsys, model_dir, beam):
    code, err = run_cli(capsys, ["translate", "--model", str(model_dir), "--text", "a", "--beam", beam])
    assert code == 2
    assert_one_line_naming(err, "--beam", f"got '{beam}'")
    assert "nbest" not in err


def test_nbest_larger_than_beam_is_still_refused(capsys, model_dir):
    argv = ["translate", "--model", str(model_dir), "--text", "a", "--beam", "2", "--nbest", "3"]
    code, err = run_cli(capsys, argv)
    assert code == 2
    assert_one_line_naming(err, "--nbest must be between 1 and --beam (2), got 3")


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("train.lr=nan", "train.lr"),
        ("train.lr=.inf", "train.lr"),
        ("train.lr=0", "train.lr"),
        ("train.label_smoothing=nan", "train.label_smoothing"),
        ("train.adam_beta2=1.0", "train.adam_beta2"),
        ("train.clip_grad_norm=-inf", "train.clip_grad_norm"),
        ("train.max_minutes=nan", "train.max_minutes"),
        ("train.test_alpha=nan", "train.test_alpha"),
        ("train.warmup=-1", "train.warmup"),
        ("train.test_beam=0", "train.test_beam"),
        ("model.dropout=nan", "model.dropout"),
        ("model.dropout=1.5", "model.dropout"),
        ("model.attention_dropout=.nan", "model.attention_dropout"),
        ("model.layer_norm_eps=nan", "model.layer_norm_eps"),
        ("model.d_model=0", "model.d_model"),
        ("data.max_length_ratio=nan", "data.max_length_ratio"),
        ("data.num_train=-5", "data.num_train"),
    ],
)
def test_bad_set_value_is_one_line_naming_the_field(capsys, override, field):
    code, err = run_cli(capsys, ["train", "--set", override])
    assert code == 2
    assert_one_line_naming(err, f"{field} must be")


def test_lm_and_classify_train_check_their_set_values_too(capsys):
    for command in (["lm", "train"], ["classify", "train"]):
        code, err = run_cli(capsys, [*command, "--set", "train.lr=nan"])
        assert code == 2
        assert_one_line_naming(err, "train.lr must be a finite number > 0, got nan")
        code, err = run_cli(capsys, [*command, "--set", "data.valid_fraction=nan"])  # the field of both
        assert code == 2
        assert_one_line_naming(err, "data.valid_fraction must be")


def test_a_data_key_of_another_task_is_one_line_naming_the_tasks_that_read_it(capsys):
    code, err = run_cli(capsys, ["train", "--set", "data.valid_fraction=0.2"])
    assert code == 2
    assert_one_line_naming(err, "data.valid_fraction is read by `aiayn lm` tasks (text) and `aiayn classify`")


def test_noam_schedule_needs_a_warmup():
    with pytest.raises(ConfigError, match="train.warmup must be >= 1 for the noam schedule"):
        load_config(None, ["train.schedule=noam", "train.warmup=0"])
    assert load_config(None, ["train.schedule=cosine", "train.warmup=0"]).train.warmup == 0


def test_good_values_still_pass_and_yaml_strings_become_floats():
    config = load_config(None, ["train.lr=5e-4", "model.layer_norm_eps=1e-6", "model.dropout=0"])
    assert config.train.lr == 5e-4
    assert config.model.overrides["layer_norm_eps"] == 1e-6


# ------------------------------------------------------------------ nothing left unchecked
# (every config field's range: tests/test_settings.py)
def numeric_options() -> list[tuple[str, argparse.Action]]:
    """(command, action) of every option of every (sub)command whose value is a number."""
    found = []

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)
            elif action.type is not None:
                found.append((parser.prog, action))

    walk(build_parser())
    return found


def test_no_numeric_option_uses_a_bare_int_or_float():
    options = numeric_options()
    assert len(options) > 20
    bare = [f"{prog} {action.dest}" for prog, action in options if action.type in (int, float)]
    assert not bare, f"options without a range check: {bare}"


def test_every_checked_option_refuses_nan_and_infinity(capsys):
    checked = [(prog, a) for prog, a in numeric_options() if a.type.__name__ in ("number", "integer")]
    assert len(checked) > 20
    for prog, action in checked:
        for text in ("nan", "inf", "-inf"):
            with pytest.raises(argparse.ArgumentTypeError, match="must be"):
                action.type(text)
                pytest.fail(f"{prog} {action.option_strings or action.dest} accepted {text!r}")


# ------------------------------------------------------------------ the validator itself
@pytest.mark.parametrize(
    ("allowed", "good", "bad", "description"),
    [
        (Range(low=0, low_open=True), [1e-300, 5.0], [0, -1, math.nan, math.inf], "a finite number > 0"),
        (Range(low=0, high=1, high_open=True), [0, 0.5], [1, -0.1, math.nan], "a finite number in [0, 1)"),
        (Range(low=1, integer=True), [1, 10**12], [0, 1.0, True, "3"], "an integer >= 1"),
        (Range(), [-1e300, 0], [math.nan, -math.inf, None], "a finite number"),
    ],
)
def test_range_contains_and_describes(allowed, good, bad, description):
    assert allowed.describe() == description
    for value in good:
        assert allowed.contains(value) and allowed.check("x", value) == value
    for value in bad:
        assert not allowed.contains(value)
        with pytest.raises(ConfigError, match="^" + re.escape(f"setting.name must be {description}, got ")):
            allowed.check("setting.name", value)


def test_argument_types_parse_and_refuse():
    alpha = finite_float(0, 10)
    assert alpha("0.6") == 0.6 and alpha("10") == 10.0
    for text in ("nan", "inf", "-0.1", "10.5", "abc", ""):
        with pytest.raises(argparse.ArgumentTypeError, match=r"must be a finite number in \[0, 10\]"):
            alpha(text)
    top_p = finite_float(0, 1, low_open=True)
    assert top_p("1") == 1.0
    with pytest.raises(argparse.ArgumentTypeError, match=r"in \(0, 1\], got '0'"):
        top_p("0")
    beam = bounded_int(1)
    assert beam("4") == 4
    for text in ("0", "-3", "2.5", "nan"):
        with pytest.raises(argparse.ArgumentTypeError, match="must be an integer >= 1"):
            beam(text)
