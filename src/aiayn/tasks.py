"""The tasks a run's config can name, and loading a config through its task's settings.

Each task package declares itself in its `settings` module: a `DataSettings` subclass
(`aiayn.training.data_settings`) whose `task` field lists the `data.task` names it reads, with
its kind of model, the command that trains it and the `data` fields it reads. This module is
the one place that knows the task packages: `task_settings()` imports their `settings` modules
when asked (importing this module imports neither them nor torch), and `load_config` /
`config_from_dict` build a `RunConfig` (`aiayn.training.config`) with the class of the task the
config names. Training itself knows no task.

A `data` key that another task reads is an error naming the tasks that read it
(`data.block_size is read by `aiayn lm` tasks (text), not by task 'dates'`), unless it holds
that task's default: the `train_config.yaml` of earlier versions lists every task's fields.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiayn.core.errors import ConfigError

if TYPE_CHECKING:
    from aiayn.training.config import RunConfig
    from aiayn.training.data_settings import DataSettings

DEFAULT_TASK = "dates"
"""The task of a config that names none; `default_config_path()` is its config."""


def task_settings() -> tuple[type[DataSettings], ...]:
    """The settings class of every task package, in the order their names are listed."""
    from aiayn.classify.settings import ClassifySettings
    from aiayn.lm.settings import LMSettings
    from aiayn.translation.settings import TranslationSettings

    return (TranslationSettings, LMSettings, ClassifySettings)


def task_names() -> tuple[str, ...]:
    """Every `data.task` name, in the order of `task_settings()`."""
    return tuple(name for settings in task_settings() for name in settings.task_names())


def settings_for(task: Any) -> type[DataSettings]:
    """The settings class that reads `data.task` `task`; a `ConfigError` listing the known tasks
    for any other value."""
    if not isinstance(task, str):
        raise ConfigError(f"data.task must be str, got {task!r}")
    for settings in task_settings():
        if task in settings.task_names():
            return settings
    raise ConfigError(f"data.task must be one of {', '.join(task_names())}; got {task!r}")


def default_config_path() -> Path:
    """The embedded default config: the built-in `dates` task (`aiayn train` without a config)."""
    return Path(__file__).resolve().parent / "configs" / f"{DEFAULT_TASK}.yaml"


def _readers(key: str) -> list[type[DataSettings]]:
    return [settings for settings in task_settings() if key in settings.defaults()]


def keys_the_task_reads(section: dict[str, Any], settings: type[DataSettings]) -> dict[str, Any]:
    """`section` (a `data` mapping for `settings`'s task) without the keys of other tasks that
    hold their default; a key of another task set otherwise is a `ConfigError` naming the tasks
    that read it. Keys no task reads stay, for the loader to list the valid ones."""
    own = {field.name for field in dataclasses.fields(settings)}
    kept = {}
    for key, value in section.items():
        readers = [] if key in own else _readers(key)
        if not readers:
            kept[key] = value
        elif any(value != reader.defaults()[key] for reader in readers):
            named = " and ".join(f"`{r.command}` tasks ({', '.join(r.task_names())})" for r in readers)
            task = section.get("task", DEFAULT_TASK)
            raise ConfigError(f"data.{key} is read by {named}, not by task {task!r}")
    return kept


def config_from_dict(data: Any) -> RunConfig:
    """Validate a nested dict (as read from YAML) into a `RunConfig`, its `data` section the
    settings of the task it names (`DEFAULT_TASK` when it names none)."""
    from aiayn.training.config import build_config, check_sections, data_section

    data = check_sections(data)
    section = data_section(data)
    settings = settings_for(section.get("task", DEFAULT_TASK))
    return build_config({**data, "data": keys_the_task_reads(section, settings)}, settings)


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """`aiayn.training.config.apply_overrides` with the settings of the task the result names
    (a string field takes the text as written: `--set data.src_lang=no`)."""
    from aiayn.training import config

    applied = config.apply_overrides(data, overrides)
    task = applied.get("data", {}).get("task", DEFAULT_TASK)
    try:
        settings = settings_for(task)
    except ConfigError:  # reported by `config_from_dict`, beside the other checks
        return applied
    return config.apply_overrides(data, overrides, settings)


def load_config(path: str | Path | None, overrides: list[str] = ()) -> RunConfig:
    """Read `path` (the built-in `dates` config when None), apply overrides, validate; errors
    name the file."""
    from aiayn.training.config import read_yaml

    source = path if path is not None else default_config_path()
    data = read_yaml(source)
    try:
        return config_from_dict(apply_overrides(data, list(overrides)))
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
