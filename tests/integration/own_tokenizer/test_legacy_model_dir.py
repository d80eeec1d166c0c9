"""A model directory written before the special-token ids were stored (aiayn at commit e5ef21d,
`tests/fixtures/legacy_dates/`) loads and translates exactly as that code did."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiayn
from aiayn.cli.main import main

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "legacy_dates"


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def translator():
    return aiayn.load(FIXTURE, device="cpu")


def test_the_fixture_predates_the_stored_ids(translator):
    stored = json.loads((FIXTURE / "config.json").read_text())["config"]
    assert not {"bos_id", "eos_id", "unk_id"} & set(stored)
    config = translator.model.config
    assert (config.pad_id, config.bos_id, config.eos_id, config.unk_id) == (0, 1, 2, 3)
    assert translator.tokenizers.specials.ids == {0, 1, 2, 3}


def test_translations_are_those_of_the_old_code(translator, expected):
    sources = expected["sources"]
    assert translator.translate(sources, beam=1) == expected["greedy"]
    assert translator.translate(sources, beam=4) == expected["beam4"]
    nbest = translator.translate_nbest(sources, 3, beam=4)
    for source, hyps, old in zip(sources, nbest, expected["beam4_nbest3"], strict=True):
        assert [t.text for t in hyps] == [text for text, _ in old]
        if not source.strip():  # the old code scored a blank line 0.0; now its empty output with <eos>
            old = [(text, translator.score([source], [""])[0]) for text, _ in old]
        assert [t.score for t in hyps] == pytest.approx([score for _, score in old], abs=1e-4)
    assert translator.score(sources, expected["beam4"]) == pytest.approx(expected["score"], abs=1e-4)


def test_the_cli_translates_it_too(tmp_path, expected, capsys):
    sources = [s for s in expected["sources"] if s.strip()][:6]
    path = tmp_path / "input.txt"
    path.write_text("\n".join(sources) + "\n", encoding="utf-8")
    args = ["translate", "--model", str(FIXTURE), "--input", str(path), "--beam", "4", "--device", "cpu"]
    assert main(args) == 0
    assert capsys.readouterr().out.splitlines() == expected["beam4"][: len(sources)]
