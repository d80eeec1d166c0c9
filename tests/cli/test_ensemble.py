"""`aiayn translate / evaluate / score --model A --model B`: an ensemble on the command line gives
what `aiayn.load([A, B])` gives, with every option that applies to it, and models that cannot be
combined are refused with one line."""

from __future__ import annotations

import json

import pytest

import aiayn
from aiayn.cli.main import main
from aiayn.inference.words import translation_details
from decoding.conftest import SOURCES, TARGETS
from inference.ensemble_dirs import REFUSALS

TEXTS = [s for s in SOURCES if s]


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("ensemble_cli")
    source, reference = root / "in.txt", root / "ref.txt"
    source.write_text("".join(t + "\n" for t in TEXTS), encoding="utf-8")
    reference.write_text("".join(t + "\n" for t in TARGETS if t), encoding="utf-8")
    return source, reference


def models(dirs) -> list[str]:
    return ["--model", str(dirs.a), "--model", str(dirs.b)]


# the options of each case, and the `translate_nbest` arguments they stand for
CASES = {
    "nbest": (["--nbest", "2", "--format", "jsonl"], dict(nbest=2)),
    "prefix": (["--prefix", "a"], dict(prefix="a")),
    "sample": (["--sample", "--seed", "5", "--top-k", "6", "--top-p", "0.9", "--temperature", "0.7"],
               dict(sample=True, seed=5, top_k=6, top_p=0.9, temperature=0.7)),
    "no_repeat_ngram_size": (["--no-repeat-ngram-size", "2"], dict(no_repeat_ngram_size=2)),
    "repetition_penalty": (["--repetition-penalty", "1.4"], dict(repetition_penalty=1.4)),
    "scores_and_alignments": (["--format", "jsonl", "--scores", "--alignments", "--nbest", "2"],
                              dict(nbest=2, token_scores=True, alignments=True)),
    "int8": (["--quantize", "int8", "--format", "jsonl"], dict(quantize="int8")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_translate_gives_the_ensembles_outputs(ensemble_dirs, files, capsys, case):
    options, settings = CASES[case]
    settings = dict(settings)
    quantize = settings.pop("quantize", None)
    translator = aiayn.load([ensemble_dirs.a, ensemble_dirs.b], "cpu", quantize=quantize)
    nbest = settings.pop("nbest", 1)
    expected = translator.translate_nbest(TEXTS, nbest, beam=4, **settings)
    code, out, err = run(capsys, "translate", *models(ensemble_dirs), "--input", str(files[0]),
                         "--device", "cpu", *options)
    assert code == 0, err
    if "jsonl" in options:
        records = [json.loads(line) for line in out.splitlines()]
        tokenizer = translator.tokenizers.target
        wanted = [
            {"line": i, "rank": r, "text": t.text, "score": t.score, "log_prob": None,
             **translation_details(t, tokenizer)}
            for i, hyps in enumerate(expected) for r, t in enumerate(hyps)
        ]
        scored = translator.translate_nbest(TEXTS, nbest, beam=4, **(settings | {"token_scores": True}))
        log_probs = [sum(t.token_scores) for hyps in scored for t in hyps]  # log P of each output
        assert [r["text"] for r in records] == [w["text"] for w in wanted]
        for record, want in zip(records, wanted, strict=True):
            assert record.keys() == want.keys()
            assert record["score"] == pytest.approx(want["score"], abs=1e-5)
            if "token_scores" in want:
                assert record["token_scores"] == pytest.approx(want["token_scores"], abs=1e-5)
                assert record["alignment"] == want["alignment"]
        assert [r["log_prob"] for r in records] == pytest.approx(log_probs, abs=1e-4)
    else:
        assert out.splitlines() == [hyps[0].text for hyps in expected]


def test_evaluate_and_score_with_an_ensemble(ensemble_dirs, files, capsys, tmp_path):
    source, reference = files
    translator = aiayn.load([ensemble_dirs.a, ensemble_dirs.b], "cpu")
    code, out, err = run(capsys, "evaluate", *models(ensemble_dirs), "--input", str(source), "--ref",
                         str(reference), "--device", "cpu", "--output", str(tmp_path / "hyp.txt"),
                         "--json", str(tmp_path / "figures.json"), "--report", str(tmp_path / "report.html"))
    assert code == 0, err
    assert (tmp_path / "hyp.txt").read_text(encoding="utf-8").splitlines() == translator.translate(TEXTS)
    figures = json.loads((tmp_path / "figures.json").read_text(encoding="utf-8"))
    assert figures["model"] == [str(ensemble_dirs.a), str(ensemble_dirs.b)]
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert f"{ensemble_dirs.a} + {ensemble_dirs.b}" in json.dumps(report)  # the title names both
    code, out, err = run(capsys, "score", *models(ensemble_dirs), "--input", str(source), "--ref",
                         str(reference), "--device", "cpu")
    assert code == 0, err
    expected = translator.score(TEXTS, [t for t in TARGETS if t])
    assert [float(x) for x in out.split()] == pytest.approx(expected, abs=1e-4)


def test_one_model_is_reported_as_before(model_dir, files, capsys, tmp_path):
    code, _, err = run(capsys, "evaluate", "--model", str(model_dir), "--input", str(files[0]), "--ref",
                       str(files[1]), "--device", "cpu", "--json", str(tmp_path / "figures.json"))
    assert code == 0, err
    assert json.loads((tmp_path / "figures.json").read_text(encoding="utf-8"))["model"] == str(model_dir)


@pytest.mark.parametrize("command", ["translate", "evaluate", "score"])
@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_models_that_cannot_join_are_refused_with_one_line(ensemble_dirs, files, capsys, command, name):
    other = getattr(ensemble_dirs, name)
    if other is None:
        pytest.skip("needs the optional extra 'export' (CTranslate2)")
    inputs = ["--input", str(files[0])] + (["--ref", str(files[1])] if command != "translate" else [])
    code, out, err = run(capsys, command, "--model", str(ensemble_dirs.a), "--model", str(other), *inputs)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"aiayn {command}: error: ") and REFUSALS[name] in err


def test_compile_compiles_every_model(ensemble_dirs, capsys, monkeypatch):
    """--compile reaches each model of the ensemble (the compiled step itself is tested in
    tests/inference/test_ensemble.py; here a stand-in records which models it was given)."""
    import aiayn.runtime.compiled as compiled
    import aiayn.runtime.kept as kept

    given = []
    monkeypatch.setattr(kept, "KeptStep", lambda model, quantize=None, **_: given.append(model) or model)
    monkeypatch.setattr(compiled, "compiler_available", lambda: True)
    code, out, err = run(capsys, "translate", *models(ensemble_dirs), "--text", TEXTS[0], "--compile",
                         "--device", "cpu")
    assert code == 0, err
    assert len(given) == 2 and given[0] is not given[1]
    assert out.splitlines() == aiayn.load([ensemble_dirs.a, ensemble_dirs.b], "cpu").translate(TEXTS[:1])
