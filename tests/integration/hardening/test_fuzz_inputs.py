"""Fuzzing the file readers: corpora, tokenizer files and configs either load or raise the
project's own error type with a message naming the file; nothing else escapes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aiayn.core.errors import ConfigError, DataError
from aiayn.data.corpus import read_lines, read_parallel
from aiayn.data.tokenizer import Tokenizer
from aiayn.tasks import load_config
from aiayn.training.config import RunConfig

from .conftest import TOKENIZER_TEXTS, tiny_train_config

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Bytes that stress line handling: newlines, CR, NUL, a BOM, invalid UTF-8, gzip magic.
SPECIAL_BYTES = [
    b"\n",
    b"\r\n",
    b"\r",
    b"\x00",
    b"\xef\xbb\xbf",
    b"\xff",
    b"\xc3",
    b"\x1f\x8b",
    b"\xe2\x80\xa8",
]
corpus_bytes = st.lists(
    st.one_of(st.sampled_from(SPECIAL_BYTES), st.text(max_size=12).map(str.encode), st.binary(max_size=6)),
    max_size=25,
).map(b"".join)


def expected_line_count(data: bytes) -> int:
    """Lines as `read_lines` defines them: `\\n` ends a line, the last may lack it; a leading
    byte order mark is not part of the text."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


@FUZZ
@given(data=corpus_bytes, suffix=st.sampled_from([".txt", ".gz"]), compress=st.booleans())
@example(data=b"\x1f\x8b\x08\x00garbage", suffix=".txt", compress=False)
@example(data=b"ok\n\xffbad\n", suffix=".txt", compress=False)
@example(data=b"", suffix=".txt", compress=False)
def test_read_lines_works_or_raises_data_error(tmp_path, data, suffix, compress):
    path = tmp_path / f"corpus{suffix}"
    path.write_bytes(gzip.compress(data) if compress else data)
    try:
        lines = read_lines(path, allow_empty=True)
    except DataError as error:
        assert str(path) in str(error)
        return
    if compress or not data.startswith(b"\x1f\x8b"):
        assert len(lines) == expected_line_count(data)
        assert all("\n" not in line for line in lines)  # (one "\r" of "\r\r\n" stays: it is text)


@FUZZ
@given(src=corpus_bytes, tgt=corpus_bytes)
def test_read_parallel_works_or_raises_data_error(tmp_path, src, tgt):
    (tmp_path / "a").write_bytes(src)
    (tmp_path / "b").write_bytes(tgt)
    try:
        pairs = read_parallel(tmp_path / "a", tmp_path / "b")
    except DataError as error:
        assert str(tmp_path) in str(error)
        return
    assert len(pairs) == expected_line_count(src) == expected_line_count(tgt)


def test_read_lines_names_the_bad_line(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes(b"one\r\ntwo\n\nfo\xffur\n")
    with pytest.raises(DataError, match=rf"{path}: line 4 is not valid UTF-8"):
        read_lines(path)


# ------------------------------------------------------------------ tokenizer files
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def tokenizer_spec() -> dict:
    return json.loads(Tokenizer.train("char", TOKENIZER_TEXTS).hf.to_str())


def paths_of(value, prefix=()):
    """Every (key path) inside nested dicts/lists."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from paths_of(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value[:3]):
            yield from paths_of(child, (*prefix, i))


def check_tokenizer_file(path: Path) -> None:
    try:
        tokenizer = Tokenizer.load(path)
    except DataError as error:
        assert str(path) in str(error)
        return
    assert tokenizer.vocab_size >= 4


@FUZZ
@given(content=st.one_of(st.binary(max_size=200), json_values.map(lambda v: json.dumps(v).encode())))
def test_tokenizer_load_on_random_files(tmp_path, content):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(content)
    check_tokenizer_file(path)


@FUZZ
@given(data=st.data(), replacement=json_values)
def test_tokenizer_load_on_mutated_tokenizer_files(tmp_path, tokenizer_spec, data, replacement):
    spec = json.loads(json.dumps(tokenizer_spec))
    where = data.draw(st.sampled_from(sorted((p for p in paths_of(spec) if p), key=str)))
    parent = spec
    for key in where[:-1]:
        parent = parent[key]
    parent[where[-1]] = replacement
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    check_tokenizer_file(path)


# ------------------------------------------------------------------ config files
SECTIONS = ["data", "model", "train"]


def config_keys():
    real = tiny_train_config()
    names = [*real, *(k for section in real.values() for k in section), "preset", "vocab_size"]
    return st.one_of(st.sampled_from(names), st.text(max_size=6), st.integers(), st.none(), st.booleans())


yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(config_keys(), children, max_size=4),
    max_leaves=10,
)


def check_config_file(path: Path, overrides: list[str] = ()) -> None:
    try:
        config = load_config(path, overrides)
    except ConfigError as error:
        assert str(path) in str(error)
        return
    assert isinstance(config, RunConfig)


@FUZZ
@given(content=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
@example(content=b"a: 2001-13-01")
@example(content=b"[" * 3000)
@example(content=b"{1: 2, data: 3}")
@example(content=b"train: 5")
@example(content=b"model: {d_model: wide}")
def test_load_config_on_random_bytes(tmp_path, content):
    path = tmp_path / "config.yaml"
    path.write_bytes(content)
    check_config_file(path)


@FUZZ
@given(
    sections=st.dictionaries(st.sampled_from(SECTIONS), yaml_values, max_size=3),
    mutate=st.dictionaries(st.sampled_from(SECTIONS), st.tuples(config_keys(), yaml_values)),
    overrides=st.lists(st.text(max_size=20), max_size=2),
)
def test_load_config_on_random_yaml(tmp_path, sections, mutate, overrides):
    content = tiny_train_config() | sections
    for section, (key, value) in mutate.items():
        if isinstance(content.get(section), dict):
            content[section] = content[section] | {key: value}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(content), encoding="utf-8")
    check_config_file(path, overrides)
