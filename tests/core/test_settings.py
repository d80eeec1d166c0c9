"""Each setting is declared once, beside its field (`aiayn.core.settings`): every number has its range,
every enumerated string its choices, and the one validator refuses a value outside them, naming
the key, through every way a value arrives (YAML, `--set`, the dataclass itself)."""

from __future__ import annotations

import dataclasses
import math
import re
import typing

import pytest

from aiayn.core.errors import ConfigError
from aiayn.core.ranges import POSITIVE_INT, Range
from aiayn.core.settings import describe_settings, field_choices, field_range, is_numeric, is_text, setting
from aiayn.lm.settings import LMSettings
from aiayn.model import ModelConfig
from aiayn.tasks import apply_overrides, config_from_dict, task_names, task_settings
from aiayn.training.config import TOKENIZER_IDS, ModelSection, TrainConfig
from aiayn.translation.settings import TranslationSettings

SECTIONS = {
    **{f"data/{settings.kind}": settings for settings in task_settings()},
    "model": ModelConfig,
    "train": TrainConfig,
}
"""Each section's dataclass; the `data` section's is the task's (`data/KIND`: its settings class)."""
FROM_TOKENIZER = {"src_vocab_size", "tgt_vocab_size", *TOKENIZER_IDS}  # never in a config file

FREE_TEXT = {
    ("data", "src_lang"): "a language code",
    ("data", "tgt_lang"): "a language code",
    ("data", "cache_dir"): "a directory",
    ("data", "tokenizer"): "a kind, a tokenizer.json path or a Hub name (checked when it is made)",
    ("train", "device"): "'auto', 'cpu', 'cuda:1'... (checked by torch when it is resolved)",
    ("train", "validation_metric"): "the task's metrics (checked against the task)",
    ("train", "init_from"): "a model directory or a Hub name (checked when the run starts)",
}
"""String fields that take any text (file paths aside), and why they have no choices."""


def fields(cls: type) -> list[tuple[dataclasses.Field, typing.Any]]:
    hints = typing.get_type_hints(cls)
    return [(field, hints[field.name]) for field in dataclasses.fields(cls)]


def numeric_fields() -> list[tuple[str, str]]:
    return [
        (section, field.name)
        for section, cls in SECTIONS.items()
        for field, annotation in fields(cls)
        if is_numeric(annotation)
    ]


def enumerated_fields() -> list[tuple[str, str]]:
    found = [(s, f.name) for s, cls in SECTIONS.items() for f, _ in fields(cls) if field_choices(f)]
    return [*found, ("model", "preset")]


def config_with(section: str, name: str, value: typing.Any) -> dict[str, typing.Any]:
    """A config mapping that sets `name` of `section` (a data section names a task of its kind)."""
    where, _, kind = section.partition("/")
    values = {"task": SECTIONS[section].task_names()[0]} if kind else {}
    return {where: values | {name: value}}


def field_of(section: str, name: str) -> dataclasses.Field:
    cls = ModelSection if (section, name) == ("model", "preset") else SECTIONS[section]
    return next(f for f in dataclasses.fields(cls) if f.name == name)


def outside(allowed: Range) -> list[float]:
    """Values the range refuses: beyond each bound, and NaN and infinity."""
    values: list[float] = [math.nan, math.inf, -math.inf]
    if allowed.low is not None:
        values.append(allowed.low if allowed.low_open else allowed.low - 1)
    if allowed.high is not None:
        values.append(allowed.high if allowed.high_open else allowed.high + 1)
    if allowed.integer:
        values.append(2.5)
    return values


def test_every_number_has_its_range_and_every_string_its_choices_declared_beside_it():
    numbers = numeric_fields()
    assert len(numbers) > 40  # data, train and model all counted
    for section, name in numbers:
        allowed = field_range(field_of(section, name))
        assert isinstance(allowed, Range), f"{section}.{name} has no range"
        annotation = typing.get_type_hints(SECTIONS[section])[name]
        if int in typing.get_args(annotation) or annotation is int:
            assert allowed.integer, f"{section}.{name} is an int with a range that allows fractions"
    for section, cls in SECTIONS.items():
        for field, annotation in fields(cls):
            paths = field.name.endswith(("_src", "_tgt", "_tsv", "_file"))
            if is_text(annotation) and not paths and (section.partition("/")[0], field.name) not in FREE_TEXT:
                assert field_choices(field), f"{section}.{field.name} is a string without choices"
    names = [name for settings in task_settings() for name in settings.task_names()]
    assert len(names) == len(set(names)), f"a task name read by two settings classes: {names}"


@pytest.mark.parametrize(("section", "name"), numeric_fields(), ids="{0[0]}.{0[1]}".format)
def test_the_validator_refuses_a_number_outside_its_range_naming_the_key(section, name):
    allowed = field_range(field_of(section, name))
    annotation = typing.get_type_hints(SECTIONS[section])[name]
    for value in outside(allowed):
        # A value of the field's own type is refused with the range, any other with the type.
        right_type = isinstance(value, int) or float in {annotation, *typing.get_args(annotation)}
        expected = f" must be {allowed.describe()}, got " if right_type else " must be int, got "
        if section == "model":  # the dataclass itself, as a model directory or the API builds it
            with pytest.raises(ConfigError, match="^" + re.escape(f"ModelConfig.{name}{expected}")):
                ModelConfig(**{name: value})
            if name in FROM_TOKENIZER:
                continue
        key = f"{section.partition('/')[0]}.{name}"
        with pytest.raises(ConfigError, match="^" + re.escape(f"{key}{expected}")):
            config_from_dict(config_with(section, name, value))


@pytest.mark.parametrize(("section", "name"), enumerated_fields(), ids="{0[0]}.{0[1]}".format)
def test_the_validator_refuses_a_string_outside_its_choices_naming_the_key(section, name):
    choices = field_choices(field_of(section, name))
    if (section.partition("/")[0], name) == ("data", "task"):  # the task is looked up among all tasks
        assert set(choices) <= set(task_names())
        choices = task_names()
    message = f"^{section.partition('/')[0]}.{name} must be one of {', '.join(choices)}; got 'nonsense'"
    with pytest.raises(ConfigError, match=message):
        config_from_dict(config_with(section, name, "nonsense"))
    for choice in choices:  # and takes each of them
        assert config_from_dict(config_with(section, name, choice))


def test_set_converts_by_the_field_type():
    config = config_from_dict(apply_overrides({}, [
        "data.src_lang=no",  # a string field keeps the text (YAML would read false)
        "data.tgt_lang=on",
        "train.lr=5e-4",  # YAML reads a string; a float field takes the number
        "train.max_minutes=3",  # an int where a float is wanted
        "train.max_steps=null",
        "model.layer_norm_eps=1e-6",
    ]))
    assert (config.data.src_lang, config.data.tgt_lang) == ("no", "on")
    assert config.train.lr == 5e-4 and config.train.max_steps is None
    assert type(config.train.max_minutes) is float and config.train.max_minutes == 3.0
    assert config.model.overrides == {"layer_norm_eps": 1e-6}
    with pytest.raises(ConfigError, match="train.max_steps must be int, got 'ten'"):
        config_from_dict(apply_overrides({}, ["train.max_steps=ten"]))
    with pytest.raises(ConfigError, match="train.progress_bar must be bool, got 3"):
        config_from_dict(apply_overrides({}, ["train.progress_bar=3"]))


def test_dataclasses_check_themselves():
    with pytest.raises(ConfigError, match=r"^data.block_size must be an integer >= 1, got 0"):
        LMSettings(task="text", block_size=0)
    with pytest.raises(ConfigError, match=r"^train.schedule must be one of"):
        TrainConfig(schedule="linear")
    assert TrainConfig(lr=1).lr == 1.0 and type(TrainConfig(lr=1).lr) is float
    assert ModelConfig(dropout=0).dropout == 0.0
    with pytest.raises(ValueError, match="ModelConfig.d_model must be int, got 64.0"):
        ModelConfig(d_model=64.0)
    # what relates two fields is checked beside the ranges, however the dataclass is made
    with pytest.raises(ConfigError, match=r"data.stride must be between 1 and data.block_size \(8\), got 9"):
        LMSettings(task="text", block_size=8, stride=9)
    with pytest.raises(ConfigError, match="train.warmup must be >= 1 for the noam schedule, got 0"):
        TrainConfig(schedule="noam", warmup=0)
    with pytest.raises(ConfigError, match="data.tokenizer must be bpe, char, byte_bpe"):
        TranslationSettings(tokenizer=" ")


def test_describe_settings_lists_type_default_range_and_help():
    lines = describe_settings(TrainConfig, "train")
    assert len(lines) == len(dataclasses.fields(TrainConfig))
    lr = next(line for line in lines if line.startswith("train.lr:"))
    assert lr.startswith("train.lr: float = 0.001 (a finite number > 0) - ")
    schedule = next(line for line in lines if line.startswith("train.schedule:"))
    assert "(one of noam, inverse_sqrt, cosine, constant)" in schedule


def settings_without_help(sections: dict[str, type]) -> list[str]:
    """`section.key` of every setting declared without help text (the settings page shows it)."""
    return [
        f"{section}.{field.name}"
        for section, cls in sections.items()
        for field, _ in fields(cls)
        if not str(field.metadata.get("help", "")).strip()
    ]


def test_every_setting_says_what_it_is():
    assert settings_without_help({**SECTIONS, "model/section": ModelSection}) == []


def test_a_setting_declared_without_help_is_found():
    @dataclasses.dataclass
    class Planted:
        steps: int = setting(1, range=POSITIVE_INT)
        blank: str = setting("a", choices=("a",), help="  ")
        fine: bool = setting(True, help="said")

    found = settings_without_help({"train": TrainConfig, "planted": Planted})
    assert found == ["planted.steps", "planted.blank"]
