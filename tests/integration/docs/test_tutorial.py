"""docs/tutorial.md, run: every command of the page, in its order, on the committed 300-pair excerpt
of Tatoeba en-es (tests/fixtures/tatoeba_en_es, so no ../shared is needed) with a short budget
instead of 30 minutes. Each step must succeed, and its output must have the structure the page
documents: each pattern below matches the page's expected output *and* the real output (numbers
and words differ; the shape may not). So neither the commands nor the documented output can rot.

`aiayn` commands run in this process (one import of torch); shell lines (`zcat ... | head`) run in
bash; `aiayn serve` runs as a real process and the page's `curl` is sent to it as an HTTP request.
"""

from __future__ import annotations

import gzip
import json
import logging
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from aiayn.cli.main import main
from serve.helpers import ServerProcess, request

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "tutorial.md"
EXCERPT = ROOT / "tests" / "fixtures" / "tatoeba_en_es"
CONSOLE = re.compile(r"^```console\n(.*?)^```", re.MULTILINE | re.DOTALL)
# the short budget that replaces `--minutes 30`: a tiny model, a few dozen small steps, fp32 (no
# start-up timing of two precisions), one thread; every other setting stays `auto`
SHORT = ["--set", "train.max_steps=24", "--set", "train.batch_tokens=400", "--set", "model.preset=tiny",
         "--set", "train.precision=fp32", "--set", "train.threads=1"]
NUMBER = r"-?[\d,]+(?:\.\d+)?"

# what each step's output holds, by the words of its command (the first pattern list that matches)
SHAPES: list[tuple[str, list[str]]] = [
    ("aiayn train", [
        r"data\.vocab_size auto: [\d,]+ training pairs: \d+",
        r"model\.dropout auto: expected \d+ epochs: dropout [\d.]+",
        r"train\.warmup auto: expected [\d,]+ updates: \d+%",
        r"train\.eval_every auto: expected [\d,]+ updates: \d+%",
        r"model: \w+ preset, [\d,]+ parameters",
        rf"train step [\d,]+/[\d,]+ \| +{NUMBER}% of ",
        rf"step [\d,]+: validation loss {NUMBER}, ppl {NUMBER}, bleu {NUMBER}",
        rf"trained [\d,]+ steps in {NUMBER} min \({NUMBER} target tokens/s\)",
        rf"held-out BLEU: {NUMBER}  chrF: {NUMBER}",
    ]),
    ("aiayn plot curves", []),
    ("aiayn evaluate", [
        rf"BLEU {NUMBER}  nrefs:1\|case:mixed",
        rf"chrF {NUMBER}  nrefs:1",
        rf"speed {NUMBER} sentences/s, {NUMBER} tokens/s \({NUMBER} sentences",
        r"report: \S+\.html and \S+\.json",
    ]),
    ("aiayn translate --model runs/en-es-ct2", []),
    ("--nbest 3", [rf"(?m)^0\t{NUMBER}\t{NUMBER}\t.*$"]),
    ("--format jsonl --scores", [r'\{"line": 0, "rank": 0, "text": .*"token_scores": \[.*"word_scores": \[']),
    ("aiayn average", [r"averaged \d+ checkpoints \(step_\d+.*\) into \S+"]),
    ("aiayn export ctranslate2", [
        r"CTranslate2 model written to \S+", r"wrote \S+ \(CTranslate2 [\d.]+, float32 weights\)",
    ]),
]


def steps(text: str) -> list[tuple[str, str]]:
    """(command, documented output) of each `$ ` command of the page's ```console blocks; a
    command goes on after a trailing backslash; the lines up to the next `$ ` are its output."""
    found: list[tuple[str, str]] = []
    for block in CONSOLE.findall(text):
        command, output, continued = None, [], False
        for line in block.splitlines():
            if continued:
                command += " " + line.strip().removesuffix("\\").strip()
                continued = line.endswith("\\")
            elif line.startswith("$ "):
                if command is not None:
                    found.append((command, "\n".join(output)))
                command, output = line[2:].removesuffix("\\").strip(), []
                continued = line.endswith("\\")
            elif command is not None:
                output.append(line)
        if command is not None:
            found.append((command, "\n".join(output)))
    return found


def shape_of(command: str) -> list[str]:
    for words, patterns in SHAPES:
        if words in command:
            return patterns
    return []


def test_the_parser_and_the_shapes_see_a_broken_step() -> None:
    said = "averaged 2 checkpoints (step_1) into y"
    page = f"```console\n$ aiayn average runs/x \\\n    --last 2 --out y\n{said}\n```\n"
    assert steps(page) == [("aiayn average runs/x --last 2 --out y", said)]
    curl = """curl -s localhost:8000/v1/translate -H 'Content-Type: application/json' -d '{"text": ["a"]}'"""
    assert curl_request(curl) == ("POST", "/v1/translate", {"text": ["a"]})
    pattern = shape_of("aiayn average runs/x")[0]
    assert re.search(pattern, steps(page)[0][1])
    assert not re.search(pattern, "wrote y")  # output of another shape is caught


def test_the_page_documents_each_shape() -> None:
    """Every pattern matches the page's own expected output (the recorded run's)."""
    found = steps(PAGE.read_text(encoding="utf-8"))
    names = [command.split()[0] for command, _ in found]
    assert {"aiayn", "curl"} <= set(names)
    for words in ("aiayn train", "aiayn plot curves", "aiayn evaluate", "--nbest 3", "--scores",
                  "aiayn average", "aiayn export ctranslate2", "aiayn translate --model runs/en-es-ct2",
                  "aiayn serve"):
        assert any(words in command for command, _ in found), f"docs/tutorial.md has no `{words}` step"
    for command, documented in found:
        for pattern in shape_of(command):
            assert re.search(pattern, documented), \
                f"docs/tutorial.md, `{command}`: no {pattern!r} in its output"


def excerpt_as_the_data_dir(directory: Path) -> Path:
    """The excerpt under the file names of ../shared/data/tatoeba/en-es (gzipped, as there)."""
    directory.mkdir()
    names = {"train": "train", "valid": "valid", "test": "test_v2020"}
    for split, name in names.items():
        for language in ("en", "es"):
            text = (EXCERPT / f"{split}_excerpt.{language}").read_bytes()
            (directory / f"{name}.{language}.gz").write_bytes(gzip.compress(text))
    return directory


def curl_request(command: str) -> tuple[str, str, object]:
    """(method, path, JSON body) of the page's `curl ... URL -d JSON`."""
    words = shlex.split(command)
    url = next(word for word in words[1:] if "localhost" in word or "127.0.0.1" in word)
    body = json.loads(words[words.index("-d") + 1]) if "-d" in words else None
    path = re.sub(r"^(?:https?://)?[^/]+", "", url) or "/"
    return ("POST" if body is not None else "GET"), path, body


def keys(value: object) -> object:
    """The structure of a JSON value: its keys, nested; lists by their first element."""
    if isinstance(value, dict):
        return {key: keys(item) for key, item in value.items()}
    if isinstance(value, list):
        return [keys(value[0])] if value else []
    return type(value).__name__ if not isinstance(value, (int, float)) else "number"


def test_every_step_of_the_tutorial_runs_on_the_excerpt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
    caplog: pytest.LogCaptureFixture,
) -> None:
    data = excerpt_as_the_data_dir(tmp_path / "tatoeba-en-es")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    server: ServerProcess | None = None
    failed: list[str] = []
    try:
        for command, documented in steps(PAGE.read_text(encoding="utf-8")):
            words = command.split()
            if re.fullmatch(r"D=\S+", command):  # the data directory: the excerpt's here
                continue
            if words[:2] == ["aiayn", "serve"]:
                server = ServerProcess(work / words[words.index("--model") + 1])
                continue
            if words[0] == "curl":
                assert server is not None, "docs/tutorial.md: curl before aiayn serve"
                method, path, body = curl_request(command)
                status, answer = request(server.port, method, path, body)
                if status != 200 or keys(answer) != keys(json.loads(documented)):
                    failed.append(f"{command}\n  {status}: {answer} (documented: {documented})")
                continue
            if words[0] != "aiayn":  # a shell line: zcat, head, wc
                done = subprocess.run(["bash", "-c", command], env={"D": str(data), "PATH": "/usr/bin:/bin"},
                                      capture_output=True, text=True)
                if done.returncode != 0:
                    failed.append(f"{command}\n  exit {done.returncode}: {done.stderr[-300:]}")
                continue
            argv = shlex.split(command.replace("$D", str(data)))[1:]
            if argv[0] == "train":
                argv += SHORT
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="aiayn"):
                status = main(argv)
            out, err = capsys.readouterr()
            text = "\n".join((out, err, caplog.text))
            if status != 0:
                failed.append(f"{command}\n  exit {status}: {err[-500:]}")
                continue
            missing = [pattern for pattern in shape_of(command) if not re.search(pattern, text)]
            if missing:
                failed.append(f"{command}\n  output lacks {missing}:\n{text[-1500:]}")
            if "--out" in argv and not (work / argv[argv.index("--out") + 1]).exists():
                failed.append(f"{command}\n  wrote no {argv[argv.index('--out') + 1]}")
    finally:
        if server is not None:
            server.stop()
    assert not failed, "steps of docs/tutorial.md that failed on the excerpt:\n" + "\n".join(failed)
    results = json.loads((work / "runs" / "en-es" / "results.json").read_text())
    assert {"steps", "auto_settings", "test", "cpu_model"} <= set(results)
    assert results["steps"] == 24 and "bleu" in results["test"]
