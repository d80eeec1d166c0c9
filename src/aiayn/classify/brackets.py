"""The built-in classification task: is this bracket sequence balanced?

A sequence over the three bracket types `()[]{}` is *balanced* when every closing bracket
closes the most recent unclosed opening bracket of the same type and nothing stays open
(the Dyck language with three bracket types).

Every unbalanced example is a balanced one with some of its characters permuted, so it has
exactly as many opening as closing brackets, and as many of each single character, as a
balanced sequence: counting brackets cannot tell the classes apart. The corruptions are

- swapping two closing (or two opening) brackets of different types: the nesting depth
  stays valid everywhere but the pairs are mis-nested, e.g. `([])` -> `([)]`;
- swapping two neighbouring characters, e.g. `()[]` -> `)([]` (a bracket closed before it
  was opened);
- moving one character elsewhere, or shuffling the whole sequence;

each retried until the result is unbalanced. Labels are balanced with probability 1/2 and
lengths are uniform over the even lengths 2 .. max_len, the same for both classes.

Everything is deterministic given the seed; the validation and test examples are distinct
from every training example and from each other (held out).
"""

from __future__ import annotations

import random

from aiayn.errors import ConfigError, DataError

OPEN_TO_CLOSE = {"(": ")", "[": "]", "{": "}"}
CLOSE_TO_OPEN = {close: open_ for open_, close in OPEN_TO_CLOSE.items()}
LABELS = ["balanced", "unbalanced"]
MAX_TRIES = 100  # per corruption attempt, and per unique held-out example (times 1000)

Example = tuple[str, str]  # (text, label)


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


def _swap_types(rng: random.Random, chars: list[str], kind: str) -> list[str] | None:
    """Swap two brackets of the same direction (`kind` '([{' or ')]}') but different types."""
    positions = [i for i, c in enumerate(chars) if c in kind]
    pairs = [(i, j) for i in positions for j in positions if i < j and chars[i] != chars[j]]
    return _swap(chars, *rng.choice(pairs)) if pairs else None


def corrupt(rng: random.Random, text: str) -> str:
    """An unbalanced permutation of the balanced `text` (see the module docstring)."""
    chars = list(text)
    if len(chars) < 2:
        raise ValueError(f"cannot corrupt {text!r}: need at least one bracket pair")
    for _ in range(MAX_TRIES):
        kind = rng.random()
        if kind < 0.3:
            out = _swap_types(rng, chars, ")]}")
        elif kind < 0.5:
            out = _swap_types(rng, chars, "([{")
        elif kind < 0.75:
            i = rng.randrange(len(chars) - 1)
            out = _swap(chars, i, i + 1)
        elif kind < 0.9:
            out = list(chars)
            out.insert(rng.randrange(len(chars)), out.pop(rng.randrange(len(chars))))
        else:
            out = rng.sample(chars, len(chars))
        if out is not None and not is_balanced(result := "".join(out)):
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
        raise ConfigError(f"data.max_len must be >= 2 for the brackets task, got {max_len}")
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
                    "not in the training set; raise data.max_len or lower data.num_train"
                )
            if text not in seen:
                seen.add(text)
                examples.append((text, label))
        splits[split] = examples
    return splits
