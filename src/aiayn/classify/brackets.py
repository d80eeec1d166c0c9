"""The built-in classification task: is this bracket sequence balanced?

A sequence over the three bracket types `()[]{}` is *balanced* when every closing bracket
closes the most recent unclosed opening bracket of the same type and nothing stays open
(the Dyck language with three bracket types).

Every unbalanced example is a permutation of a balanced one, so it has exactly as many
opening as closing brackets, and as many of each single character, as a balanced sequence:
counting brackets cannot tell the classes apart. Most unbalanced examples are a
random shuffle of a balanced sequence; the others (about one in four) are *mis-nested*: the closing brackets
of two innermost pairs of different types are swapped, e.g. `()[]` -> `(][)` or
`(()[])` -> `((][))`, so the nesting depth stays valid everywhere (no bracket closes
before it opens, none is left open) but the pairs do not match. Labels are balanced with
probability 1/2 and lengths are uniform over the even lengths 2 .. max_len, the same for
both classes.

Every unbalanced example breaks the order of at least one bracket type on its own (the
`(`/`)` subsequence, say, is unbalanced). Mis-nestings that keep each type's own order
intact, like `([)]`, are left out: recognising them needs stack-like matching across types,
which a small encoder-only model does not learn in the few CPU minutes this built-in task is
meant to take (benchmarks/RESULTS.md has the figures).

Everything is deterministic given the seed; the validation and test examples are distinct
from every training example and from each other (held out).
"""

from __future__ import annotations

import random

from aiayn.core.errors import ConfigError, DataError

OPEN_TO_CLOSE = {"(": ")", "[": "]", "{": "}"}
CLOSE_TO_OPEN = {close: open_ for open_, close in OPEN_TO_CLOSE.items()}
LABELS = ["balanced", "unbalanced"]
MAX_TRIES = 100  # per corruption attempt, and per unique held-out example (times 1000)

Example = tuple[str, str]  # (text, label)


def types_balanced(text: str) -> bool:
    """True when each bracket type on its own (`()`, `[]`, `{}` subsequences) is balanced."""
    return all(
        is_balanced("".join(char for char in text if char in (open_, close)))
        for open_, close in OPEN_TO_CLOSE.items()
    )


def is_balanced(text: str) -> bool:
    """True when `text` is a well-nested bracket sequence (characters other than `()[]{}`
    make it unbalanced)."""
    stack: list[str] = []
    for char in text:
        if char in OPEN_TO_CLOSE:
            stack.append(char)
        elif char in CLOSE_TO_OPEN:
            if not stack or stack.pop() != CLOSE_TO_OPEN[char]:
                return False
        else:
            return False
    return not stack


def random_balanced(rng: random.Random, num_pairs: int) -> str:
    """A random balanced sequence of `num_pairs` bracket pairs of random types."""
    out: list[str] = []
    stack: list[str] = []
    opens_left = num_pairs
    while opens_left or stack:
        if opens_left and (not stack or rng.random() < 0.5):
            char = rng.choice("([{")
            stack.append(char)
            out.append(char)
            opens_left -= 1
        else:
            out.append(OPEN_TO_CLOSE[stack.pop()])
    return "".join(out)


def _swap(chars: list[str], i: int, j: int) -> list[str]:
    chars = list(chars)
    chars[i], chars[j] = chars[j], chars[i]
    return chars


def _mis_nest(rng: random.Random, chars: list[str]) -> list[str] | None:
    """Swap the closing brackets of two innermost pairs (like `()` and `[]`) of different types."""
    inner = [i for i in range(len(chars) - 1) if OPEN_TO_CLOSE.get(chars[i]) == chars[i + 1]]
    pairs = [(i, j) for i in inner for j in inner if i < j and chars[i] != chars[j]]
    if not pairs:
        return None
    i, j = rng.choice(pairs)
    return _swap(chars, i + 1, j + 1)


def corrupt(rng: random.Random, text: str) -> str:
    """An unbalanced permutation of the balanced `text` in which at least one bracket type is
    unbalanced on its own (see the module docstring)."""
    chars = list(text)
    if len(chars) < 2:
        raise ValueError(f"cannot corrupt {text!r}: need at least one bracket pair")
    if (
        rng.random() < 0.25
        and (out := _mis_nest(rng, chars)) is not None
        and not types_balanced(result := "".join(out))
    ):
        return result
    for _ in range(MAX_TRIES):
        if not types_balanced(result := "".join(rng.sample(chars, len(chars)))):
            return result
    # Moving the first character (an opening bracket) to the end always leaves it unclosed.
    return text[1:] + text[0]


def random_example(rng: random.Random, max_len: int) -> Example:
    """One (text, label) example of even length 2 .. max_len."""
    text = random_balanced(rng, rng.randint(1, max_len // 2))
    if rng.random() < 0.5:
        return text, LABELS[0]
    return corrupt(rng, text), LABELS[1]


def make_brackets(
    seed: int, num_train: int, num_valid: int, num_test: int, max_len: int = 32
) -> dict[str, list[Example]]:
    """The train/valid/test splits; held-out texts never occur in an earlier split."""
    if max_len < 2:
        raise ConfigError(
            f"data.max_sentence_tokens (max_len) must be >= 2 for the brackets task, got {max_len}"
        )
    for name, value in (("num_train", num_train), ("num_valid", num_valid), ("num_test", num_test)):
        if value < 0:
            raise ConfigError(f"data.{name} must be >= 0, got {value}")
    rng = random.Random(f"aiayn-brackets-{seed}")
    splits = {"train": [random_example(rng, max_len) for _ in range(num_train)]}
    seen = {text for text, _ in splits["train"]}
    for split, count in (("valid", num_valid), ("test", num_test)):
        examples: list[Example] = []
        tries = 0
        while len(examples) < count:
            text, label = random_example(rng, max_len)
            tries += 1
            if tries > MAX_TRIES * 1000 + count:
                raise DataError(
                    f"could not find {count} {split} bracket sequences of length <= {max_len} that are "
                    "not in the training set; raise data.max_sentence_tokens or lower data.num_train"
                )
            if text not in seen:
                seen.add(text)
                examples.append((text, label))
        splits[split] = examples
    return splits
