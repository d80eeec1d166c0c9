"""Faults while the newer writers write: `aiayn export` (both formats), `aiayn import`, `aiayn average`
and a `--report` page: the file-size limit and the SIGKILL in a subprocess of the CLI, the full disk
(a fault of the file system) and the reruns in this process.

- a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored: a write past it fails with EFBIG);
- a full disk (ENOSPC: the output on a tiny tmpfs; skipped where this machine cannot mount one);
- SIGKILL in the middle of the write (the process kills itself at its n-th file write or rename).

Each must end with a one-line error (the faults with an error) and leave nothing that a loader or a
rerun takes for a finished output; the rerun without the fault (in this process) then succeeds.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from aiayn import formats
from aiayn.cli.main import main
from aiayn.data import Tokenizer, TokenizerPair
from aiayn.formats import load_model
from aiayn.model import ModelConfig, Transformer
from aiayn.training.checkpoint import save_checkpoint

SRC = Path(__file__).resolve().parents[3] / "src"
LIMIT_BYTES = 6000  # larger than the small files (configs, cards), smaller than weights and tokenizers
TEXTS = ["ein hund läuft", "zwei katzen", "a dog runs", "two cats"]

# The process under test: optional faults, then the CLI. FAULT_FSIZE sets the file-size limit;
# FAULT_KILL_AT=n kills the process (SIGKILL) at its n-th opening of a file for writing or rename
# under FAULT_UNDER (Python's audit events: the moments a writer creates or publishes a file).
RUNNER = """
import os, resource, signal, sys
if os.environ.get("FAULT_FSIZE"):
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    size = int(os.environ["FAULT_FSIZE"])
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
if os.environ.get("FAULT_KILL_AT"):
    under, kill_at, seen = os.environ["FAULT_UNDER"], int(os.environ["FAULT_KILL_AT"]), [0]
    def hook(event, args):
        writing = event == "open" and isinstance(args[0], str) and (
            any(c in (args[1] or "") for c in "wax+") or (args[2] or 0) & (os.O_WRONLY | os.O_RDWR))
        if (writing or event in ("os.rename", "os.replace")) and str(args[0]).startswith(under):
            seen[0] += 1
            if seen[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
    sys.addaudithook(hook)
from aiayn.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def aiayn(*argv: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = os.environ | {"PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
                                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", RUNNER, *map(str, argv)], capture_output=True, text=True,
                          env=environment | (env or {}), timeout=300)


def rerun(*argv: str | Path) -> int:
    """The same command without a fault, in this process (a subprocess is only needed to plant
    the fault, and each would import torch again): its exit status."""
    return main([str(arg) for arg in argv])


def in_process(capsys: pytest.CaptureFixture, *argv: str | Path) -> subprocess.CompletedProcess:
    """The command in this process, as `aiayn()` reports a subprocess (a fault that is in the
    file system, not in the process, needs no process of its own)."""
    capsys.readouterr()
    status = rerun(*argv)
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess([str(arg) for arg in argv], status, out, err)


def assert_one_line_error(result: subprocess.CompletedProcess, reason: str) -> None:
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and len(errors) == 1, result.stderr
    assert reason in errors[0] and errors[0].startswith("aiayn "), result.stderr
    assert "nothing was written" in errors[0], result.stderr


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A random tiny translation model directory (char tokenizer)."""
    directory = tmp_path_factory.mktemp("faults_model")
    tokenizer = Tokenizer.train("char", TEXTS)
    torch.manual_seed(0)
    config = ModelConfig.tiny(vocab_size=tokenizer.vocab_size, d_model=32, num_heads=2,
                              num_encoder_layers=1, num_decoder_layers=1, d_ff=64, max_len=40)
    formats.save_pretrained(Transformer(config), directory)
    TokenizerPair(tokenizer, tokenizer).save(directory)
    return directory


@pytest.fixture(scope="module")
def run_dir(model_dir, tmp_path_factory) -> Path:
    """A run directory with two checkpoints of that model (what `aiayn average` reads)."""
    directory = tmp_path_factory.mktemp("faults_run")
    model = load_model(model_dir)
    for step in (1, 2):
        state = {"optimizer": {}, "train_state": {"step": step}, "rng_cpu": torch.get_rng_state()}
        save_checkpoint(directory, step, model, state, keep=5)
    for name in model_dir.glob("*tokenizer.json"):
        shutil.copyfile(name, directory / name.name)
    return directory


@pytest.fixture(scope="module")
def hf_dir(model_dir, tmp_path_factory) -> Path:
    """The model exported to Hugging Face Transformers (what `aiayn import` reads)."""
    pytest.importorskip("transformers", reason="needs the optional extra 'export'")
    out = tmp_path_factory.mktemp("faults_hf") / "hf"
    assert rerun("export", "huggingface", "--model", model_dir, "--out", out) == 0
    return out


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("faults_text") / "src.txt"
    path.write_text("\n".join(TEXTS[:2]) + "\n", encoding="utf-8")
    return path


def command(kind: str, out: Path, model_dir: Path, run_dir: Path, sources: Path,
            request: pytest.FixtureRequest) -> list[str | Path]:
    """The argv of writer `kind` writing `out`."""
    if kind in ("export-ctranslate2", "export-huggingface"):
        pytest.importorskip("ctranslate2" if kind.endswith("ctranslate2") else "transformers",
                            reason="needs the optional extra 'export'")
        return ["export", kind.removeprefix("export-"), "--model", model_dir, "--out", out]
    if kind == "import":
        return ["import", "huggingface", request.getfixturevalue("hf_dir"), "--out", out]
    if kind == "average":
        return ["average", run_dir, "--last", "2", "--out", out]
    return ["translate", "--model", model_dir, "--input", sources, "--device", "cpu", "--beam", "1",
            "--max-len", "5", "--report", out]


def assert_usable(kind: str, out: Path) -> None:
    """What a finished output is: a loadable model directory, or a page with its data."""
    if kind == "report":
        assert "<html" in out.read_text(encoding="utf-8").lower()
        json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    elif kind == "export-ctranslate2":
        import ctranslate2

        ctranslate2.Translator(str(out), device="cpu")
    elif kind == "export-huggingface":
        from transformers import AutoModelForSeq2SeqLM

        AutoModelForSeq2SeqLM.from_pretrained(out)
    else:
        load_model(out)


def leftovers(out: Path) -> list[str]:
    """Anything `out`'s writer left beside it: `out` itself, its JSON, temporaries."""
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith((out.name, f".{out.name}",
                                                                           out.stem, f".{out.stem}")))


KINDS = ["export-ctranslate2", "export-huggingface", "import", "average", "report"]


def output_path(directory: Path, kind: str) -> Path:
    return directory / ("page.html" if kind == "report" else "out")


@pytest.mark.parametrize("kind", KINDS)
def test_a_file_size_limit_gives_a_one_line_error_and_no_output(kind, model_dir, run_dir, sources, request,
                                                                tmp_path):
    out = output_path(tmp_path, kind)
    argv = command(kind, out, model_dir, run_dir, sources, request)
    result = aiayn(*argv, env={"FAULT_FSIZE": str(LIMIT_BYTES)})
    assert_one_line_error(result, "File too large")
    assert leftovers(out) == []
    assert rerun(*argv) == 0
    assert_usable(kind, out)


@contextlib.contextmanager
def tiny_tmpfs(directory: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted on `directory` (root and a kernel that lets us), else a skip."""
    directory.mkdir(parents=True, exist_ok=True)
    if not shutil.which("mount") or os.geteuid() != 0:
        pytest.skip("a full disk needs a tiny tmpfs: mounting one needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"a full disk needs a tiny tmpfs, and this machine cannot mount one: {mounted.stderr}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


@pytest.mark.parametrize("kind", KINDS)
def test_a_full_disk_gives_a_one_line_error_and_no_output(kind, model_dir, run_dir, sources, request,
                                                           tmp_path, capsys):
    """(That the same write succeeds where there is room, the file-size test shows.)"""
    with tiny_tmpfs(tmp_path / "disk", "12k") as disk:
        out = output_path(disk, kind)
        result = in_process(capsys, *command(kind, out, model_dir, run_dir, sources, request))
        assert_one_line_error(result, "No space left on device")
        assert leftovers(out) == []


KILL_AT = (2,)
"""The writes (file creations or renames under the output's directory) the process is killed at: the
second, after one file of every writer here is written and before the output is complete."""


@pytest.mark.parametrize("kind", KINDS)
def test_sigkill_during_the_write_leaves_nothing_a_loader_or_rerun_accepts(kind, model_dir, run_dir,
                                                                          sources, request, tmp_path):
    for kill_at in KILL_AT:
        directory = tmp_path / f"kill{kill_at}"
        directory.mkdir()
        out = output_path(directory, kind)
        argv = command(kind, out, model_dir, run_dir, sources, request)
        result = aiayn(*argv, env={"FAULT_KILL_AT": str(kill_at), "FAULT_UNDER": str(directory)})
        assert result.returncode == -signal.SIGKILL, result.stderr  # killed mid-write
        assert not out.exists()  # no half-written output where a loader looks
    assert rerun(*argv) == 0  # beside a killed write's leftovers
    assert_usable(kind, out)
