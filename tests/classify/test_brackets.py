"""The built-in brackets task: correct labels, equal counts, held-out splits, determinism."""

import random
from collections import Counter

import pytest

from aiayn.classify.brackets import (
    LABELS,
    corrupt,
    is_balanced,
    make_brackets,
    random_balanced,
    types_balanced,
)
from aiayn.core.errors import ConfigError, DataError


@pytest.mark.parametrize(
    ("text", "balanced"),
    [("()", True), ("([]{})", True), ("{[()()]}[]", True), ("([)]", False), (")(", False),
     ("(()", False), ("(]", False), ("", True), ("(a)", False)],
)  # fmt: skip
def test_is_balanced(text, balanced):
    assert is_balanced(text) is balanced


def test_types_balanced_looks_at_each_type_alone():
    assert types_balanced("([)]") and types_balanced("([])")
    assert not types_balanced("(][)") and not types_balanced(")(")


@pytest.fixture(scope="module")
def splits():
    return make_brackets(seed=4, num_train=1500, num_valid=200, num_test=200, max_len=20)


def test_labels_are_correct_and_both_classes_occur(splits):
    for examples in splits.values():
        for text, label in examples:
            assert label == (LABELS[0] if is_balanced(text) else LABELS[1]), text
            assert 2 <= len(text) <= 20 and len(text) % 2 == 0
    counts = Counter(label for _, label in splits["train"])
    assert abs(counts[LABELS[0]] - counts[LABELS[1]]) < 200


def test_unbalanced_examples_have_equal_bracket_counts(splits):
    unbalanced = [text for text, label in splits["train"] if label == LABELS[1]]
    for text in unbalanced:
        counts = Counter(text)
        for opening, closing in ("()", "[]", "{}"):
            assert counts[opening] == counts[closing], text

    # Mis-nested ones (depth never negative, nothing left open) are among them: counting fails.
    def depth_ok(text):
        depth = 0
        for char in text:
            depth += 1 if char in "([{" else -1
            if depth < 0:
                return False
        return True

    assert sum(depth_ok(text) for text in unbalanced) > len(unbalanced) // 10
    # ... and every one breaks the order of some bracket type on its own (no `([)]`).
    assert not any(types_balanced(text) for text in unbalanced)


def test_held_out_splits_are_disjoint_and_deterministic(splits):
    train = {text for text, _ in splits["train"]}
    valid = [text for text, _ in splits["valid"]]
    test = [text for text, _ in splits["test"]]
    assert len(valid) == len(set(valid)) == 200 and len(test) == len(set(test)) == 200
    assert not (train & set(valid)) and not (train & set(test)) and not (set(valid) & set(test))
    assert make_brackets(seed=4, num_train=1500, num_valid=200, num_test=200, max_len=20) == splits
    assert make_brackets(seed=5, num_train=1500, num_valid=200, num_test=200, max_len=20) != splits


def test_corrupt_always_gives_an_unbalanced_permutation():
    rng = random.Random(0)
    for _ in range(300):
        text = random_balanced(rng, rng.randint(1, 8))
        assert is_balanced(text)
        bad = corrupt(rng, text)
        assert not is_balanced(bad) and not types_balanced(bad) and sorted(bad) == sorted(text)


def test_impossible_requests_are_errors():
    with pytest.raises(ConfigError, match="max_len"):
        make_brackets(1, 10, 10, 10, max_len=1)
    with pytest.raises(DataError, match="not in the training set"):
        make_brackets(1, 200, 50, 0, max_len=2)  # only 3 balanced + 3 unbalanced texts exist
