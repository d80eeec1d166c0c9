"""The settings validator, by property (Hypothesis): for every numeric setting of every section, any
value outside its declared range is refused with a `ConfigError` naming the key, and any value inside
is accepted. Shown catching a planted bug in the range check."""

from __future__ import annotations

import dataclasses
import math
import typing

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from aiayn.core.errors import ConfigError
from aiayn.core.ranges import Range
from aiayn.core.settings import check_settings, field_range, is_numeric
from aiayn.model import ModelConfig
from aiayn.tasks import task_settings
from aiayn.training.config import TrainConfig

SECTIONS = [*(("data", cls) for cls in task_settings()), ("model", ModelConfig), ("train", TrainConfig)]
"""Each section and its dataclass; the `data` section once per task's settings class."""
NUMERIC = [
    (section, cls, field.name, field_range(field))
    for section, cls in SECTIONS
    for field in dataclasses.fields(cls)
    if is_numeric(typing.get_type_hints(cls)[field.name]) and field_range(field) is not None
]
FEW = settings(max_examples=150, deadline=None, database=None)
PLANTED = settings(FEW, phases=[Phase.generate], derandomize=True)
BIG = 1e12  # where an unbounded side is drawn from


def inside(allowed: Range) -> st.SearchStrategy:
    """Values the declared range allows (drawn from the bounds, not from `Range.contains`)."""
    low = -BIG if allowed.low is None else allowed.low
    high = BIG if allowed.high is None else allowed.high
    if allowed.integer:
        first = math.floor(low) + 1 if allowed.low_open or low != math.floor(low) else int(low)
        last = math.ceil(high) - 1 if allowed.high_open or high != math.ceil(high) else int(high)
        return st.integers(first, last)
    return st.floats(low, high, exclude_min=allowed.low_open and allowed.low is not None,
                     exclude_max=allowed.high_open and allowed.high is not None)


def outside(allowed: Range) -> st.SearchStrategy:
    """Values it refuses: NaN, infinities, past either bound, and fractions where it wants integers."""
    options = [st.sampled_from([math.nan, math.inf, -math.inf])]
    # An open bound itself, drawn on purpose: the value a closed-for-open mistake lets through.
    open_bounds = [b for b, is_open in ((allowed.low, allowed.low_open), (allowed.high, allowed.high_open))
                   if b is not None and is_open]
    if open_bounds:
        options.append(st.sampled_from(open_bounds))
    if allowed.low is not None:
        options.append(st.floats(-BIG, allowed.low, exclude_max=not allowed.low_open))
        if allowed.integer:
            options.append(st.integers(-(2**40), math.ceil(allowed.low) - (0 if allowed.low_open else 1)))
    if allowed.high is not None:
        options.append(st.floats(allowed.high, BIG, exclude_min=not allowed.high_open))
    if allowed.integer:
        options.append(st.floats(-BIG, BIG).filter(lambda value: not value.is_integer()))
    return st.one_of(options)


@st.composite
def setting_and_value(draw, side):
    section, cls, name, allowed = draw(st.sampled_from(NUMERIC))
    return section, cls, name, draw(side(allowed))


def check_the_validator(config: settings = FEW) -> None:
    @config
    @given(setting_and_value(outside))
    def refuses_outside(case) -> None:
        section, cls, name, value = case
        try:
            check_settings(cls, {name: value}, section)
        except ConfigError as refused:
            assert str(refused).startswith(f"{section}.{name} must be "), str(refused)
        else:
            raise AssertionError(f"{section}.{name} = {value!r} was accepted")

    @config
    @given(setting_and_value(inside))
    def accepts_inside(case) -> None:
        section, cls, name, value = case
        assert check_settings(cls, {name: value}, section)[name] == value

    refuses_outside()
    accepts_inside()


def test_every_numeric_setting_refuses_outside_its_range_and_accepts_inside():
    assert len(NUMERIC) > 40  # data, train and model all drawn from
    check_the_validator()


@pytest.mark.parametrize("bug", ["open bound taken as closed", "upper bound ignored"])
def test_the_property_catches_a_planted_bug(monkeypatch, bug):
    real = Range.contains

    def buggy(self: Range, value: object) -> bool:
        if bug == "open bound taken as closed":
            return real(dataclasses.replace(self, low_open=False, high_open=False), value)
        return real(dataclasses.replace(self, high=None), value)

    monkeypatch.setattr(Range, "contains", buggy)
    with pytest.raises(AssertionError):
        check_the_validator(PLANTED)
