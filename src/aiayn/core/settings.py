"""Settings declared once: type, default, range or choices and help text beside the field.

Every configuration dataclass (`ModelConfig`, the `train` section of a run's config in
`aiayn.training.config`, each task's `data` settings in its package) declares each field with
`setting()`; its annotation is the type, and `check_settings()` is the one validator that reads
them all: it converts what YAML and `--set` give (an int where a float is wanted, a "5e-4" that
YAML reads as a string) and refuses a wrong type, a number outside its range or a string outside
its choices with a `ConfigError` naming the key (`train.lr must be a finite number > 0, got nan`).

To add a setting, write one line in its dataclass, and nothing anywhere else:

    warmup_share: float | None = setting(
        None, range=PROBABILITY, help="share of the budget spent warming up (None: `warmup` steps)"
    )

- a number (`int` or `float`, optionally `| None`) must have a `range` (an `aiayn.core.ranges.Range`;
  `None` stays allowed when the type has it); an integer field takes an integer range
  (`POSITIVE_INT`, `NON_NEGATIVE_INT`, `Range(low=.., high=.., integer=True)`);
- a string with a fixed set of values has `choices`;
- `help` says what it is (shown by `describe_settings`);
- a `data` field goes in the settings class of the tasks that read it (`aiayn.tasks`), or in a
  group of `aiayn.training.data_settings` when two kinds of task read it;
- a step count that may also be a share of the run ('6%') says `share=True` (annotated
  `int | str`; the string is checked by `parse_share`, the number by the range);
- a number that may also be 'auto' (chosen at start-up, `aiayn.training.auto_settings`) says
  `auto=True` (annotated `int | str`; any other string is refused, the number checked by the
  range).
It is then a YAML key and a `--set` path (`train.warmup_share=0.05`, converted by its type), and
`tests/test_settings.py` checks it: a number without a range fails, so does a string without
choices unless the test's `FREE_TEXT` says why it takes any text, and a value outside the range
must be refused naming the key. A setting written the older way (a bare `name: float = 0.05`
and an entry in a `(section, key) -> Range` table) moves to this form unchanged in meaning:
the table's `Range` becomes `range=`. A new config dataclass calls `validate(self, "section")`
in its `__post_init__`; checks that relate two fields (d_model divisible by num_heads) follow it
there.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
import typing
from typing import Any

from aiayn.core.errors import ConfigError
from aiayn.core.ranges import Range

_MISSING: Any = dataclasses.MISSING

SHARE_PATTERN = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*%\s*$")


def parse_share(name: str, value: object) -> float | None:
    """The share (in (0, 1]) that a setting such as '6%' stands for; None for a step count (an int).

    Raises `ConfigError` naming `name` for a string that is not a percentage in (0, 100].
    """
    if not isinstance(value, str):
        return None
    match = SHARE_PATTERN.match(value)
    share = float(match.group(1)) / 100 if match else math.nan
    if not 0 < share <= 1:
        raise ConfigError(f"{name} must be a step count or a share of the run in (0%, 100%], got {value!r}")
    return share


def setting(
    default: Any = _MISSING,
    *,
    default_factory: Any = _MISSING,
    range: Range | None = None,
    choices: tuple[str, ...] | None = None,
    help: str = "",
    share: bool = False,
    auto: bool = False,
) -> Any:
    """A dataclass field with its range or choices, help text and whether it may be a share of
    the run or 'auto', kept in the field's metadata for `check_settings`."""
    metadata = {"range": range, "choices": choices, "help": help, "share": share, "auto": auto}
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def field_range(field: dataclasses.Field) -> Range | None:
    """The declared range of a numeric field, or None."""
    return field.metadata.get("range")


def field_choices(field: dataclasses.Field) -> tuple[str, ...] | None:
    """The declared choices of an enumerated string field, or None."""
    return field.metadata.get("choices")


def value_types(annotation: Any) -> tuple[set[Any], bool]:
    """The types a field's annotation allows besides None, and whether None is allowed."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        options = set(typing.get_args(annotation))
        return options - {type(None)}, type(None) in options
    return {annotation}, False


def is_numeric(annotation: Any) -> bool:
    """Whether a field holds a number (int or float, possibly None; bool is not a number)."""
    kinds, _ = value_types(annotation)
    return bool(kinds & {int, float}) and bool not in kinds


def is_text(annotation: Any) -> bool:
    """Whether a field holds a string (possibly None)."""
    kinds, _ = value_types(annotation)
    return kinds == {str}


def _convert(key: str, value: Any, annotation: Any) -> Any:
    """`value` as the annotation's type: ints become floats where a float is wanted, a YAML
    string like "5e-4" a float; anything else of the wrong basic type is a `ConfigError`."""
    kinds, optional = value_types(annotation)
    if value is None and optional:
        return None
    kind = next(iter(kinds)) if len(kinds) == 1 else None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is float and isinstance(value, str):
        try:  # PyYAML reads "5e-4" (no dot) as a string
            return float(value)
        except ValueError:
            pass
    wrong = kind in (int, float, str, bool) and not isinstance(value, kind)
    if wrong or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{key} must be {kind.__name__}, got {value!r}")
    return value


def check_setting(key: str, value: Any, field: dataclasses.Field, annotation: Any) -> Any:
    """One value checked against its field: the converted value, or a `ConfigError` naming
    `key` (the field as the user wrote it: `train.lr`, `model.dropout`, `ModelConfig.d_model`)."""
    if field.metadata.get("auto") and value == "auto":
        return value
    if field.metadata.get("share"):
        if isinstance(value, str):
            parse_share(key, value)  # a percentage in (0, 100], or a ConfigError naming the key
            return value.strip()
        annotation = int  # otherwise a step count
    if field.metadata.get("auto"):
        if isinstance(value, str):
            raise ConfigError(f"{key} must be a number or 'auto', got {value!r}")
        annotation = int | None if value_types(annotation)[1] else int  # otherwise a number
    value = _convert(key, value, annotation)
    allowed = field_range(field)
    if allowed is not None and value is not None:
        allowed.check(key, value)
    choices = field_choices(field)
    if choices is not None and value is not None and value not in choices:
        raise ConfigError(f"{key} must be one of {', '.join(choices)}; got {value!r}")
    return value


@functools.cache
def _fields(cls: type) -> tuple[dict[str, dataclasses.Field], dict[str, Any]]:
    """A dataclass's fields by name, and their resolved annotations."""
    return {field.name: field for field in dataclasses.fields(cls)}, typing.get_type_hints(cls)


def check_settings(cls: type, values: dict[str, Any], where: str) -> dict[str, Any]:
    """`values` (field name -> value, a subset of `cls`'s fields) checked and converted, each
    error naming `where.name`. Unknown names are left to the caller (it knows their context)."""
    fields, hints = _fields(cls)
    return {
        name: check_setting(f"{where}.{name}", value, fields[name], hints[name]) if name in fields else value
        for name, value in values.items()
    }


def validate(instance: Any, where: str) -> None:
    """Check (and convert in place) every field of a dataclass instance; for `__post_init__`."""
    values = {field.name: getattr(instance, field.name) for field in dataclasses.fields(instance)}
    for name, value in check_settings(type(instance), values, where).items():
        if value is not values[name]:  # converted (0 -> 0.0)
            object.__setattr__(instance, name, value)


def text_value(cls: type, name: str, text: str, parsed: Any) -> Any:
    """A command-line value (`--set section.name=text`, `parsed` its YAML reading) as the field
    wants it: a string field keeps the text as written (`--set data.src_lang=no` is Norwegian,
    not YAML's false), every other field the YAML value."""
    _, hints = _fields(cls)
    if name in hints and is_text(hints[name]) and parsed is not None and not isinstance(parsed, str):
        return text.strip()
    return parsed


class SettingDoc(typing.NamedTuple):
    """What a reader needs to know of one setting (the settings reference page lists these)."""

    key: str  # `where.name`
    type: str  # as a user writes it: `int | None`, `int | 'auto'`, `int | 'N%'`
    default: Any  # `REQUIRED` when the field has none
    allowed: str  # the range or the choices, "" when any value of the type goes
    auto: bool  # whether it takes 'auto' (chosen at start-up)
    help: str


REQUIRED: Any = object()
"""The `SettingDoc.default` of a field without a default."""


def _type_name(kind: Any) -> str:
    if kind is type(None):
        return "None"
    if isinstance(kind, type) and not typing.get_args(kind):
        return kind.__name__
    return str(kind).replace("typing.", "")


def setting_docs(cls: type, where: str) -> list[SettingDoc]:
    """One `SettingDoc` per field of a settings dataclass, in declaration order."""
    fields, hints = _fields(cls)
    docs = []
    for name, field in fields.items():
        if field.default is not _MISSING:
            default = field.default
        elif field.default_factory is not _MISSING:
            default = field.default_factory()
        else:
            default = REQUIRED
        share, auto = field.metadata.get("share", False), field.metadata.get("auto", False)
        kinds, optional = value_types(hints[name])
        if share or auto:  # the string they take is a share or 'auto', named below
            kinds = kinds - {str}
        names = [_type_name(kind) for kind in sorted(kinds, key=_type_name)] + ["None"] * optional
        names += ["'N%'"] * share + ["'auto'"] * auto
        allowed, choices = field_range(field), field_choices(field)
        bound = allowed.describe() if allowed else ("one of " + ", ".join(choices) if choices else "")
        auto = auto or bool(choices and "auto" in choices) or default == "auto"
        docs.append(SettingDoc(f"{where}.{name}", " | ".join(names), default, bound, auto,
                               field.metadata.get("help", "")))
    return docs


def describe_settings(cls: type, where: str) -> list[str]:
    """One line per field: `where.name: type = default (range or choices) - help`."""
    lines = []
    for doc in setting_docs(cls, where):
        default = "required" if doc.default is REQUIRED else repr(doc.default)
        line = f"{doc.key}: {doc.type} = {default}" + (f" ({doc.allowed})" if doc.allowed else "")
        lines.append(line + (f" - {doc.help}" if doc.help else ""))
    return lines
