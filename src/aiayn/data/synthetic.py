"""Built-in toy translation tasks, generated from a seed (no files, no downloads).

* ``copy``: the source is a sequence of 3..10 short random lowercase words (1-3 letters); the
  target is the same text.
* ``reverse``: same sources; the target lists the words in reverse order.
* ``dates``: the source is a calendar date between 1950-01-01 and 2049-12-31 written in one of
  several human formats (see :data:`DATE_FORMATS`), in its usual, lower or upper case, with its
  day number (and, in numeric formats, its month number) zero-padded or not ("Thursday, 03 June
  1982" and "Thursday, 3 June 1982"; "03.06.82" and "3.6.82"); the target is the ISO date
  ``YYYY-MM-DD``. All numeric formats are day first and two-digit years mean 1950..2049, so
  every source has exactly one reading.

Held-out data is really unseen: for ``dates`` the valid and test splits use calendar dates that
appear in no training example (in any format), each held-out date once; for ``copy`` and
``reverse`` no held-out source string appears in training. The same ``(name, seed, sizes)``
always gives the same data.

To measure generalisation beyond the generator, :data:`HELDOUT_DATE_FORMATS` lists formats the
training generator never produces (:func:`heldout_format_pairs` rewrites held-out dates in them):

* ``{Wkd}, {dd} {Mon} {Y}``: the e-mail (RFC 5322) style, "Thu, 03 Jun 1982";
* ``{Weekday} the {dth} of {Month} {Y}``: "Thursday the 3rd of June 1982";
* ``{Mon}. {d}, {Y}``: the abbreviation with a full stop, "Jun. 3, 1982";
* ``{dd}-{mm}-{Y}``: numeric with hyphens, "03-06-1982";
* ``{Y}/{mm}/{dd}``: year first, "1982/06/03" (no training format puts the year first).
"""

import random
from collections.abc import Callable
from datetime import date, timedelta

from aiayn.core.errors import ConfigError, DataError

TASKS = ("copy", "reverse", "dates")
FIRST_DATE = date(1950, 1, 1)
LAST_DATE = date(2049, 12, 31)
NUM_DAYS = (LAST_DATE - FIRST_DATE).days + 1

WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip

Pairs = list[tuple[str, str]]


def ordinal(n: int) -> str:
    """``1`` -> ``"1st"``, ``2`` -> ``"2nd"``, ``11`` -> ``"11th"``, ``23`` -> ``"23rd"``."""
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _fields(d: date, pad_day: bool | None, pad_month: bool | None) -> dict[str, str]:
    """The pieces a format template names. ``pad_day`` / ``pad_month``: True writes every day /
    month number with two digits, False with as few as needed, None as the template says
    (``{dd}``/``{mm}`` padded, ``{d}`` not)."""
    weekday, month = WEEKDAYS[d.weekday()], MONTHS[d.month - 1]
    day, padded_day = str(d.day), f"{d.day:02d}"
    month_number, padded_month = str(d.month), f"{d.month:02d}"
    if pad_day is not None:
        day = padded_day = padded_day if pad_day else day
    if pad_month is not None:
        padded_month = padded_month if pad_month else month_number
    return {
        "Weekday": weekday,
        "Wkd": weekday[:3],
        "Month": month,
        "Mon": month[:3],
        "mon": month[:3].lower(),
        "d": day,
        "dd": padded_day,
        "dth": ordinal(d.day),  # nobody writes "03rd"
        "mm": padded_month,
        "Y": str(d.year),
        "yy": f"{d.year % 100:02d}",
    }


# Every format is day first (or spells the month), so none is ambiguous. "yy" is 1950..2049.
DATE_FORMATS = [
    "{Weekday}, {d} {Month} {Y}",  # Saturday, 21 November 2026
    "{d} {Month} {Y}",  # 21 November 2026
    "{Month} {d}, {Y}",  # November 21, 2026
    "{mon} {dth} {Y}",  # nov 21st 2026
    "{dth} of {Month} {Y}",  # 21st of November 2026
    "{dd}.{mm}.{yy}",  # 21.11.26
    "{dd}.{mm}.{Y}",  # 21.11.2026
    "{dd}/{mm}/{Y}",  # 21/11/2026
    "{Wkd} {d} {Mon} {Y}",  # Sat 21 Nov 2026
    "{dd}-{Mon}-{Y}",  # 21-Nov-2026
    "{Weekday} {dth} {Month} {Y}",  # Saturday 21st November 2026
    "{Month} {dth}, {Y}",  # November 21st, 2026
    "{d} {Mon} {Y}",  # 21 Nov 2026
    "{Mon} {d}, {Y}",  # Nov 21, 2026
    "{Weekday}, {Month} {d}, {Y}",  # Saturday, November 21, 2026
]
"""Training formats. A day number ({d} or {dd}) and a numeric month ({mm}) are written
zero-padded or not, each drawn at random per example (see `format_date`)."""

HELDOUT_DATE_FORMATS = [
    "{Wkd}, {dd} {Mon} {Y}",  # Thu, 03 Jun 1982
    "{Weekday} the {dth} of {Month} {Y}",  # Thursday the 3rd of June 1982
    "{Mon}. {d}, {Y}",  # Jun. 3, 1982
    "{dd}-{mm}-{Y}",  # 03-06-1982
    "{Y}/{mm}/{dd}",  # 1982/06/03
]
"""Formats the training generator never produces, scored separately (`heldout_format_pairs`)."""

CASES = ("as_is", "lower", "upper")


def format_date(
    d: date,
    fmt_id: int,
    case: str = "as_is",
    *,
    pad_day: bool | None = None,
    pad_month: bool | None = None,
    formats: list[str] = DATE_FORMATS,
) -> str:
    """``d`` written in ``formats[fmt_id]``, then lower- or upper-cased if asked.

    ``pad_day`` / ``pad_month``: True = two digits ("03"), False = unpadded ("3"), None = the
    template's own style ({dd}/{mm} padded, {d} not).
    """
    text = formats[fmt_id].format(**_fields(d, pad_day, pad_month))
    if case == "lower":
        return text.lower()
    if case == "upper":
        return text.upper()
    if case != "as_is":
        raise ValueError(f"unknown case {case!r}; choose one of {CASES}")
    return text


def two_digit_year(yy: int) -> int:
    """The year meant by a two-digit year: 50..99 -> 1950..1999, 00..49 -> 2000..2049."""
    return 1900 + yy if yy >= 50 else 2000 + yy


def _date_example(
    rng: random.Random, d: date, formats: list[str] = DATE_FORMATS
) -> tuple[str, str]:
    fmt_id = rng.randrange(len(formats))
    case = rng.choices(CASES, weights=(3, 1, 1))[0]
    pad_day, pad_month = rng.random() < 0.5, rng.random() < 0.5
    text = format_date(d, fmt_id, case, pad_day=pad_day, pad_month=pad_month, formats=formats)
    return text, d.isoformat()


def heldout_format_pairs(
    pairs: Pairs, seed: int = 0, formats: list[str] = HELDOUT_DATE_FORMATS
) -> Pairs:
    """The target dates of ``pairs`` (ISO strings) rewritten in ``formats`` (by default
    :data:`HELDOUT_DATE_FORMATS`, never produced for training), each with a random format, case
    and padding: a test of generalisation to new ways of writing a date."""
    rng = random.Random(f"aiayn-heldout-formats-{seed}")
    return [_date_example(rng, date.fromisoformat(t), formats) for _, t in pairs]


def _dates(rng: random.Random, num_train: int, num_valid: int, num_test: int) -> dict[str, Pairs]:
    held_out = num_valid + num_test
    if held_out > NUM_DAYS // 2:
        raise ConfigError(
            f"dates: valid + test = {held_out} held-out dates, at most {NUM_DAYS // 2} allowed"
        )
    days = [FIRST_DATE + timedelta(days=i) for i in range(NUM_DAYS)]
    rng.shuffle(days)
    test_days, valid_days = days[:num_test], days[num_test:held_out]
    train_days = days[held_out:]
    return {
        "train": [_date_example(rng, rng.choice(train_days)) for _ in range(num_train)],
        "valid": [_date_example(rng, d) for d in valid_days],
        "test": [_date_example(rng, d) for d in test_days],
    }


def _random_words(rng: random.Random, min_words: int = 3, max_words: int = 10) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [
        "".join(rng.choices(letters, k=rng.randint(1, 3)))
        for _ in range(rng.randint(min_words, max_words))
    ]


def _sequences(
    rng: random.Random, target: Callable[[list[str]], list[str]], sizes: dict[str, int]
) -> dict[str, Pairs]:
    """Held-out splits first, then training data that avoids their sources."""
    seen: set[str] = set()
    splits: dict[str, Pairs] = {}
    for split in ("test", "valid", "train"):
        pairs: Pairs = []
        held_out = split != "train"
        while len(pairs) < sizes[split]:
            words = _random_words(rng)
            source = " ".join(words)
            if source in seen:
                continue
            if held_out:
                seen.add(source)
            pairs.append((source, " ".join(target(words))))
        splits[split] = pairs
    return splits


def make_task(
    name: str,
    seed: int = 0,
    num_train: int = 20_000,
    num_valid: int = 500,
    num_test: int = 1000,
) -> dict[str, Pairs]:
    """The ``"train"``, ``"valid"`` and ``"test"`` (source, target) pairs of task ``name``."""
    if name not in TASKS:
        raise DataError(f"unknown synthetic task {name!r}; choose one of {', '.join(TASKS)}")
    sizes = {"train": num_train, "valid": num_valid, "test": num_test}
    for split, size in sizes.items():
        if size < 0:
            raise ConfigError(f"{name}: num_{split} must be >= 0, got {size}")
    rng = random.Random(f"aiayn-synthetic-{name}-{seed}")
    if name == "dates":
        return _dates(rng, num_train, num_valid, num_test)
    if name == "copy":
        return _sequences(rng, lambda words: words, sizes)
    return _sequences(rng, lambda words: words[::-1], sizes)
