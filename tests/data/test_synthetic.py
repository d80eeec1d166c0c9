"""Synthetic tasks: determinism, truly held-out data, correct date targets."""

import re
from datetime import date

import pytest

from aiayn.core.errors import DataError
from aiayn.data import TASKS, format_date, make_task, synthetic
from aiayn.data.synthetic import (
    CASES,
    DATE_FORMATS,
    FIRST_DATE,
    HELDOUT_DATE_FORMATS,
    LAST_DATE,
    heldout_format_pairs,
    ordinal,
)

SMALL = {"num_train": 3000, "num_valid": 200, "num_test": 300}
MONTHS = [m.lower() for m in synthetic.MONTHS]
DAYS = [w.lower() for w in synthetic.WEEKDAYS]


@pytest.fixture(scope="module")
def dates() -> dict[str, list[tuple[str, str]]]:
    return make_task("dates", seed=7)


def find(words: list[str], names: list[str]) -> int | None:
    """Index of the name (full or first three letters) that occurs in ``words``, if any."""
    found = [i for i, name in enumerate(names) for w in words if w in (name, name[:3])]
    assert len(found) <= 1
    return found[0] if found else None


def read_date(source: str) -> tuple[date, int | None]:
    """An independent reader of the source formats: the date and the weekday (0=Monday) named."""
    text = source.lower()
    words = re.findall(r"[a-z]+", text)
    weekday, month = find(words, DAYS), find(words, MONTHS)
    numbers = [int(n) for n in re.findall(r"\d+", text)]
    if month is not None:
        day, year = numbers
        return date(year, month + 1, day), weekday
    if re.fullmatch(r"\d{4}/\d{1,2}/\d{1,2}", text):  # year first (a held-out format only)
        year, month, day = numbers
        return date(year, month, day), weekday
    day, month, year = numbers
    assert re.fullmatch(r"\d{1,2}[./-]\d{1,2}[./-](\d\d|\d\d\d\d)", text), source
    if year < 100:
        year = 1900 + year if year >= 50 else 2000 + year
    return date(year, month, day), weekday


def test_task_names_and_unknown_name():
    assert TASKS == ("copy", "reverse", "dates")
    with pytest.raises(DataError, match="copy, reverse, dates"):
        make_task("sort", seed=0)


@pytest.mark.parametrize("name", TASKS)
def test_deterministic_per_seed_and_seeds_differ(name):
    assert make_task(name, seed=3, **SMALL) == make_task(name, seed=3, **SMALL)
    assert make_task(name, seed=3, **SMALL)["train"] != make_task(name, seed=4, **SMALL)["train"]


@pytest.mark.parametrize("name", TASKS)
def test_split_sizes(name):
    data = make_task(name, seed=0, num_train=50, num_valid=20, num_test=30)
    assert {k: len(v) for k, v in data.items()} == {"train": 50, "valid": 20, "test": 30}


def test_default_test_split_has_at_least_1000_examples(dates):
    assert len(dates["test"]) >= 1000


def test_held_out_dates_never_seen_in_training(dates):
    train = {tgt for _, tgt in dates["train"]}
    valid = [tgt for _, tgt in dates["valid"]]
    test = [tgt for _, tgt in dates["test"]]
    assert len(set(test)) == len(test) and len(set(valid)) == len(valid)
    assert not train & set(test) and not train & set(valid) and not set(valid) & set(test)


def test_every_source_reads_back_to_its_iso_target(dates):
    for split, pairs in dates.items():
        for source, target in pairs:
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", target)
            iso = date.fromisoformat(target)
            assert FIRST_DATE <= iso <= LAST_DATE
            read, weekday = read_date(source)
            assert read == iso, (split, source, target)
            if weekday is not None:
                assert weekday == iso.weekday(), (source, target)


def test_formats_and_cases_all_used(dates):
    sources = [s for s, _ in dates["train"]]
    assert any(s.isupper() for s in sources) and any(s.islower() for s in sources)
    shapes = {re.sub(r"[A-Za-z]+", "w", re.sub(r"\d", "9", s)) for s in sources}
    assert len(shapes) >= 10
    assert {"99.99.99", "99.99.9999", "99/99/9999", "99-w-9999"} <= shapes
    assert {"9.9.99", "9.99.9999", "99/9/9999", "9-w-9999"} <= shapes  # unpadded days and months


def test_days_are_zero_padded_and_unpadded_after_weekdays_and_month_names(dates):
    """Issue 19: "Thursday, 03 June 1982" was never generated, and the model misread it."""
    sources = [s for s, _ in dates["train"]]
    single_digit_day = {
        "weekday, padded": r"[A-Za-z]+,? 0[1-9] [A-Za-z]+ \d{4}",
        "weekday, unpadded": r"[A-Za-z]+,? [1-9] [A-Za-z]+ \d{4}",
        "month name, padded": r"[A-Za-z]+ 0[1-9], \d{4}",
        "month name, unpadded": r"[A-Za-z]+ [1-9], \d{4}",
        "day first, padded": r"0[1-9] [A-Za-z]+ \d{4}",
        "day first, unpadded": r"[1-9] [A-Za-z]+ \d{4}",
    }
    for what, pattern in single_digit_day.items():
        assert sum(bool(re.fullmatch(pattern, s)) for s in sources) > 100, what


def renderings(d: date) -> set[str]:
    """Every string the training generator can write for ``d``."""
    return {
        format_date(d, i, case, pad_day=pad_day, pad_month=pad_month)
        for i in range(len(DATE_FORMATS))
        for case in CASES
        for pad_day in (True, False)
        for pad_month in (True, False)
    }


def test_heldout_formats_are_never_generated_for_training_and_read_back(dates):
    pairs = heldout_format_pairs(dates["test"], seed=7)
    assert [t for _, t in pairs] == [t for _, t in dates["test"]]
    assert pairs == heldout_format_pairs(dates["test"], seed=7)
    for source, target in pairs:
        iso = date.fromisoformat(target)
        assert source not in renderings(iso), source
        read, weekday = read_date(source)
        assert read == iso, (source, target)
        assert weekday is None or weekday == iso.weekday(), source
    train = {s for s, _ in dates["train"]}
    assert not train & {s for s, _ in pairs}
    shapes = {re.sub(r"[A-Za-z]+", "w", re.sub(r"\d", "9", s)) for s, _ in pairs}
    assert {"w, 99 w 9999", "w w 99w w w 9999", "w. 9, 9999", "99-99-9999", "9999/99/99"} <= shapes
    one_format = heldout_format_pairs(dates["test"][:50], seed=7, formats=[HELDOUT_DATE_FORMATS[4]])
    assert all(re.fullmatch(r"\d{4}/\d{1,2}/\d{1,2}", s) for s, _ in one_format)


def test_format_examples_and_two_digit_years():
    d = date(2026, 11, 21)
    formats = [format_date(d, i) for i in range(len(DATE_FORMATS))]
    for expected in [
        "Saturday, 21 November 2026",
        "21 November 2026",
        "November 21, 2026",
        "nov 21st 2026",
        "21st of November 2026",
        "21.11.26",
        "21.11.2026",
        "21/11/2026",
        "Sat 21 Nov 2026",
        "21-Nov-2026",
    ]:
        assert expected in formats
    assert format_date(d, 0, "upper") == "SATURDAY, 21 NOVEMBER 2026"
    assert format_date(d, 0, "lower") == "saturday, 21 november 2026"
    assert format_date(date(1950, 1, 1), 5) == "01.01.50"
    assert format_date(date(2049, 12, 31), 5) == "31.12.49"
    assert format_date(date(1999, 3, 4), 0).startswith("Thursday")
    june_3 = date(1982, 6, 3)
    assert format_date(june_3, 0, pad_day=True) == "Thursday, 03 June 1982"
    assert format_date(june_3, 0, pad_day=False) == format_date(june_3, 0) == "Thursday, 3 June 1982"
    assert format_date(june_3, 5) == format_date(june_3, 5, pad_day=True, pad_month=True) == "03.06.82"
    assert format_date(june_3, 5, pad_day=False, pad_month=False) == "3.6.82"
    assert format_date(june_3, 7, pad_day=True, pad_month=False) == "03/6/1982"
    assert format_date(june_3, 3, pad_day=True) == "jun 3rd 1982"  # ordinals are never padded
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 31)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "31st",
    ]  # fmt: skip


def test_two_digit_year_examples_in_data(dates):
    two_digit = [(s, t) for s, t in dates["train"] if re.fullmatch(r"\d\d\.\d\d\.\d\d", s)]
    assert len(two_digit) > 100
    for source, target in two_digit:
        yy, year = int(source[-2:]), int(target[:4])
        assert year == (1900 + yy if yy >= 50 else 2000 + yy)


@pytest.mark.parametrize("name", ["copy", "reverse"])
def test_copy_and_reverse_targets_and_held_out_sources(name):
    data = make_task(name, seed=1, **SMALL)
    for pairs in data.values():
        for source, target in pairs:
            words = source.split()
            assert 3 <= len(words) <= 10 and all(re.fullmatch(r"[a-z]{1,3}", w) for w in words)
            assert target.split() == (words if name == "copy" else words[::-1])
    train = {s for s, _ in data["train"]}
    held_out = [s for s, _ in data["valid"] + data["test"]]
    assert len(set(held_out)) == len(held_out) and not train & set(held_out)
