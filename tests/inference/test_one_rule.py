"""Decoding owns its rules, each written once: the output-length rule
(`aiayn.decoding.common.output_length_limit`) serves beam search, greedy search, the
CTranslate2 wrapper and the prefix check; the per-step controls sequence
(`aiayn.decoding.controls.controlled_log_probs`) serves beam and greedy search."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import aiayn
from aiayn.decoding import common, controls

CALLERS = ("aiayn.decoding.beam_search", "aiayn.decoding.greedy", "aiayn.inference.base",
           "aiayn.inference.ctranslate2")


def record_callers(monkeypatch, function: Callable) -> list[set[str]]:
    """Replace every reference to `function` in aiayn's modules by a wrapper that records, per
    call, the names (`file:function`) of the frames that led to it."""
    for name in CALLERS:
        importlib.import_module(name)
    calls: list[set[str]] = []

    def wrapper(*args, **kwargs):
        frame, stack = sys._getframe(1), set()
        while frame is not None:
            stack.add(f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}")
            frame = frame.f_back
        calls.append(stack)
        return function(*args, **kwargs)

    for name, module in list(sys.modules.items()):
        if name.startswith("aiayn") and module is not None:
            for attribute, value in list(vars(module).items()):
                if value is function:
                    monkeypatch.setattr(module, attribute, wrapper)
    return calls


def called_from(calls: list[set[str]], where: str) -> bool:
    return any(where in stack for stack in calls)


def test_one_output_length_rule(model_dir, monkeypatch) -> None:
    calls = record_callers(monkeypatch, common.output_length_limit)
    translator = aiayn.load(model_dir, "cpu", task="translation")
    translator.translate(["abc"], beam=2)
    assert called_from(calls, "beam_search.py:_beam_search")
    calls.clear()
    translator.translate(["abc"], beam=1)
    assert called_from(calls, "greedy.py:greedy_search")
    calls.clear()
    translator.translate(["abc"], beam=1, prefix="a")
    assert called_from(calls, "base.py:_prefixes")


def test_the_ctranslate2_wrapper_uses_the_output_length_rule(model_dir, monkeypatch, tmp_path) -> None:
    pytest.importorskip("ctranslate2", reason="needs the optional extra 'export'")
    from aiayn.export import export_ctranslate2

    exported = export_ctranslate2(model_dir, tmp_path / "ct2")
    calls = record_callers(monkeypatch, common.output_length_limit)
    aiayn.load(exported, "cpu", task="translation").translate(["abc"], beam=2)
    assert called_from(calls, "ctranslate2.py:_search")


def test_one_controls_sequence(model_dir, monkeypatch) -> None:
    calls = record_callers(monkeypatch, controls.controlled_log_probs)
    translator = aiayn.load(model_dir, "cpu", task="translation")
    translator.translate(["abc"], beam=2, no_repeat_ngram_size=2)
    assert called_from(calls, "beam_search.py:_beam_search")
    calls.clear()
    translator.translate(["abc"], beam=1, repetition_penalty=1.2)
    assert called_from(calls, "greedy.py:greedy_search")


def test_the_recorder_sees_a_function_that_is_not_called(model_dir, monkeypatch) -> None:
    """The check is not vacuous: a rule the searches do not use is never recorded."""
    calls = record_callers(monkeypatch, common.length_penalty)
    aiayn.load(model_dir, "cpu", task="translation").translate(["abc"], beam=1)
    assert not called_from(calls, "greedy.py:greedy_search")
