"""Two systems: the paired bootstrap p-values of the report equal sacreBLEU's command line
(`sacrebleu REF -i OTHER MODEL --paired-bs -m bleu chrf`) on the same files."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aiayn.cli.main import main
from aiayn.evaluation.report_compare import paired_bootstrap, wins_and_losses

REFERENCES = [
    "a dog runs in the park",
    "two cats sleep on the sofa",
    "the man reads a book",
    "a woman rides a bike",
    "children play in the snow",
    "the old man walks slowly",
    "a red car drives past",
    "birds sing in the tree",
    "the girl eats an apple",
    "people wait for the bus",
    "a boy throws a ball",
    "the sun sets over the sea",
]
SYSTEM_A = [
    "a dog runs in a park",
    "two cats sleep on a sofa",
    "the man reads book",
    "a woman is riding a bike",
    "kids play in snow",
    "the old man walks slow",
    "a car drives past",
    "birds sing in trees",
    "the girl eats apple",
    "people wait for a bus",
    "a boy throws the ball",
    "sun sets over sea",
]
SYSTEM_B = [
    "a dog runs in the park",
    "two cats sleep on the sofa",
    "the man reads a book",
    "a woman rides a bike",
    "children play in snow",
    "the old man walks slowly",
    "a red car drives by",
    "birds sing in the tree",
    "the girl eats an apple",
    "people wait for bus",
    "a boy throws a ball",
    "the sun sets over sea",
]


def sacrebleu_cli(ref: Path, baseline: Path, system: Path) -> dict[str, float]:
    """p-values of `system` from sacreBLEU's own command line (its text table: 'p = 0.0010')."""
    executable = shutil.which("sacrebleu", path=str(Path(sys.executable).parent)) or shutil.which("sacrebleu")
    if executable is None:
        pytest.skip("no sacrebleu command")
    result = subprocess.run(
        [
            executable,
            str(ref),
            "-i",
            str(baseline),
            str(system),
            "--paired-bs",
            "-m",
            "bleu",
            "chrf",
            "-f",
            "text",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    p_values = [float(p) for p in re.findall(r"\(p = ([0-9.]+)\)", result.stdout)]
    assert len(p_values) == 2, result.stdout
    return {"BLEU": p_values[0], "chrF": p_values[1]}


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_p_values_equal_sacrebleus_command_line(tmp_path):
    ref, a, b = (
        write(tmp_path / "ref.txt", REFERENCES),
        write(tmp_path / "a.txt", SYSTEM_A),
        write(tmp_path / "b.txt", SYSTEM_B),
    )
    for baseline, system, base_path, system_path in ((SYSTEM_A, SYSTEM_B, a, b), (SYSTEM_B, SYSTEM_A, b, a)):
        ours = paired_bootstrap(REFERENCES, baseline, system)
        theirs = sacrebleu_cli(ref, base_path, system_path)
        for metric in ("BLEU", "chrF"):
            assert round(ours[metric]["p_value"], 4) == theirs[metric], metric
    assert ours["BLEU"]["p_value"] < 0.05 and ours["BLEU"]["system"] < ours["BLEU"]["baseline"]


def test_wins_and_losses():
    assert wins_and_losses([50.0, 20.0, 30.0, 30.0], [40.0, 25.0, 30.0, 10.0]) == {
        "wins": 2,
        "losses": 1,
        "ties": 1,
    }


def test_evaluate_compare_hyp_reports_sacrebleus_p_values(tiny_model, tmp_path, capsys):
    """The report's own hypotheses against --compare-hyp: the same p-values as the command line
    on the hypotheses it saved (--output) and the compared file."""
    sources = [f"ein hund {i}" for i in range(len(REFERENCES))]
    src, ref = write(tmp_path / "src.txt", sources), write(tmp_path / "ref.txt", REFERENCES)
    other = write(tmp_path / "other.txt", SYSTEM_A)
    out, hyp = tmp_path / "cmp.html", tmp_path / "model.hyp"
    argv = [
        "evaluate",
        "--model",
        str(tiny_model),
        "--input",
        str(src),
        "--ref",
        str(ref),
        "--device",
        "cpu",
        "--max-len",
        "4",
        "--output",
        str(hyp),
        "--report",
        str(out),
        "--compare-hyp",
        str(other),
    ]
    assert main(argv) == 0
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    compare = data["compare"]
    theirs = sacrebleu_cli(ref, other, hyp)
    for metric in ("BLEU", "chrF"):
        assert round(compare["significance"][metric]["p_value"], 4) == theirs[metric]
    assert sum(compare["chrf"].values()) == len(REFERENCES)
    assert [s["compare"]["hypothesis"] for s in data["sentences"]] == SYSTEM_A
    assert f"p = {compare['significance']['BLEU']['p_value']:.4f}" in capsys.readouterr().out
