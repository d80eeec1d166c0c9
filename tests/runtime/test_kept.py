"""The kept compiled decoding step (`aiayn.runtime.kept`, `aiayn.runtime.kept_store`): built once,
loaded by a second process without tracing, never used for other weights or another torch,
rebuilt when damaged, one valid file after two builders at once.

One variant (`greedy-single`: one sentence, greedy) of the tiny model is built once for the module
(`kept`); the tests copy or plant files from it, and a build they need to cause, not to run, is
stood in for by a recorder (`_build`)."""

import io
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import aiayn
from aiayn import formats
from aiayn.core.errors import ConfigError
from aiayn.decoding import greedy_search
from aiayn.runtime.compiled import compiler_available
from aiayn.runtime.kept import KeptStep, kept_directory
from aiayn.runtime.kept_store import (
    KERNELS,
    MAGIC,
    DamagedArtifact,
    StaleArtifact,
    read_artifact,
    write_artifact,
)
from threads import one_thread  # noqa: F401 (autouse: one intra-op thread, as the kept step's key)

pytestmark = pytest.mark.skipif(not compiler_available(), reason="compiling needs a C++ compiler")

SENTENCE = "ein hund läuft"


@dataclass
class Kept:
    cache: Path  # the user cache directory ($AIAYN_CACHE_DIR) holding it
    path: Path  # the kept file (steps/<digest>/greedy-single.step)
    model: torch.nn.Module


def source(model: torch.nn.Module, model_dir: Path, text: str = SENTENCE) -> torch.Tensor:
    """(1, S) ids of `text` and <eos>."""
    ids = aiayn.load(model_dir, "cpu").tokenizers.source.encode(text)
    return torch.tensor([[*ids, model.config.eos_id]])


@pytest.fixture(scope="module")
def kept(model_dir, tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cache = tmp_path_factory.mktemp("kept-cache")
        model = aiayn.load(model_dir, "cpu").model
        runner = KeptStep(model, build=True, root=cache / "steps", label=str(model_dir))
        greedy_search(runner, source(model, model_dir), 10)
        assert runner.built == ["greedy-single"] and runner.calls["kept"] > 0
        # The weights were marked static for the build only: a variant loaded later refuses
        # every call on weights still marked.
        weights = runner.weight_slices()
        assert weights and not any(hasattr(t, "_has_dynamo_dim_marking") for t in weights)
        return Kept(cache, runner.path("greedy-single"), model)
    finally:
        torch.set_num_threads(threads)


def copy_entry(kept: Kept, root: Path, kernels: bool = True) -> Path:
    """The kept file copied into `root` (a steps folder), at the same place, with its compiled
    kernels (else a load compiles them again); its path there."""
    target = root / kept.path.parent.name / kept.path.name
    target.parent.mkdir(parents=True)
    shutil.copyfile(kept.path, target)
    if kernels:
        shutil.copytree(kept.path.parent.parent / KERNELS, root / KERNELS)
    return target


def plant_key(path: Path, **fields) -> None:
    """Rewrite a kept file's header with `fields` of its key changed (the payload kept whole)."""
    data = path.read_bytes()
    end = data.index(b"\n", len(MAGIC))
    header = json.loads(data[len(MAGIC):end])
    header["key"].update(fields)
    path.write_bytes(MAGIC + json.dumps(header).encode() + b"\n" + data[end + 1:])


def record_builds(monkeypatch) -> list[str]:
    """Stand in for the compile: record which variants are built (they then run eagerly)."""
    built: list[str] = []
    monkeypatch.setattr(KeptStep, "_build", lambda self, variant: built.append(variant))
    return built


WORKER = """
import json, logging, sys, torch
torch.set_num_threads(1)
logging.basicConfig(level=logging.INFO)
import aiayn
from torch._dynamo.utils import counters
model_dir, sentence = sys.argv[1], sys.argv[2]
kept = aiayn.load(model_dir, "cpu", compile="auto")
eager = aiayn.load(model_dir, "cpu", compile=False)
print(json.dumps({
    "runner": type(kept.runner).__name__, "kept": kept.translate([sentence], beam=1),
    "eager": eager.translate([sentence], beam=1), "calls": dict(kept.runner.calls),
    "built": kept.runner.built,
    "traced": counters["stats"]["unique_graphs"] + counters["stats"]["calls_captured"],
}))
"""


def test_a_second_process_reuses_the_kept_step_and_decodes_as_eager(kept, model_dir, monkeypatch):
    """A new process finds the kept step (`--compile auto`), loads it and traces nothing (Dynamo's
    counters stay at zero), runs its steps through it, and translates exactly as eager decoding."""
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(kept.cache))
    done = subprocess.run([sys.executable, "-c", WORKER, str(model_dir), SENTENCE],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["runner"] == "KeptStep" and result["built"] == []
    assert result["traced"] == 0
    assert result["calls"]["kept"] >= 1
    assert result["kept"] == result["eager"]
    assert "kept decoding step (greedy-single" in done.stderr  # the load's log line, with its size


def test_a_changed_weight_file_gets_a_step_of_its_own(kept, model_dir, tmp_path, monkeypatch):
    """Other weights are another key: the kept step is not found for them, and forcing the
    compile builds theirs (the original file untouched)."""
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(kept.cache))
    changed = tmp_path / "changed"
    shutil.copytree(model_dir, changed)
    model = aiayn.load(changed, "cpu").model
    with torch.no_grad():
        next(model.parameters())[0, 0] += 0.5
    formats.save_pretrained(model, changed)
    assert type(aiayn.load(model_dir, "cpu", compile="auto").runner).__name__ == "KeptStep"
    assert type(aiayn.load(changed, "cpu", compile="auto").runner).__name__ == "PrepackedStep"
    before = kept.path.read_bytes()
    built = record_builds(monkeypatch)
    translator = aiayn.load(changed, "cpu", compile=True)
    assert translator.runner.directory != kept.path.parent
    translator.translate([SENTENCE], beam=1)
    assert built == ["greedy-single"]
    assert kept.path.read_bytes() == before


def test_a_kept_step_of_another_torch_version_is_never_used(kept, tmp_path, monkeypatch, model_dir, caplog):
    """A file whose key names another torch is refused (`StaleArtifact`), said in one line, and
    built again; without building, that variant runs eagerly."""
    planted = copy_entry(kept, tmp_path)
    plant_key(planted, torch="2.12.0")
    key, _ = kept_directory(kept.model, None)
    with pytest.raises(StaleArtifact, match="another torch"):
        read_artifact(planted, key)
    eager = KeptStep(kept.model, build=False, root=tmp_path)
    with caplog.at_level(logging.WARNING, "aiayn"):
        greedy_search(eager, source(kept.model, model_dir), 10)
    assert eager.calls["kept"] == 0 and eager.variants == {"greedy-single": None}
    built = record_builds(monkeypatch)
    caplog.clear()
    with caplog.at_level(logging.WARNING, "aiayn"):
        greedy_search(KeptStep(kept.model, build=True, root=tmp_path), source(kept.model, model_dir), 10)
    assert built == ["greedy-single"]
    [line] = caplog.messages
    assert "not used: it was made for another torch; building it again" in line


def test_a_truncated_kept_step_warns_once_and_is_rebuilt(kept, tmp_path, model_dir, caplog, monkeypatch):
    """A file cut short gives one warning line and is built again, whole; a later process loads
    the new one. (The build stands in for the compile: it keeps the payload the fixture built.)"""
    damaged = copy_entry(kept, tmp_path)
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])
    key, _ = kept_directory(kept.model, None)
    with pytest.raises(DamagedArtifact, match="truncated"):
        read_artifact(damaged, key)
    payload = read_artifact(kept.path, key)[1]
    monkeypatch.setattr(KeptStep, "_build", keeping(payload))
    runner = KeptStep(kept.model, build=True, root=tmp_path)
    with caplog.at_level(logging.WARNING, "aiayn"):
        greedy_search(runner, source(kept.model, model_dir), 10)
    [line] = caplog.messages
    assert "is damaged" in line and "truncated" in line and "\n" not in line
    assert runner.built == ["greedy-single"] and runner.calls["kept"] > 0
    assert read_artifact(damaged, key) is not None  # whole again
    again = KeptStep(kept.model, build=False, root=tmp_path)
    greedy_search(again, source(kept.model, model_dir), 10)
    assert again.calls["kept"] > 0 and again.built == []


def keeping(payload: bytes, seconds: float = 0.0):
    """A `KeptStep._build` standing in for the compile: after `seconds`, it keeps `payload` (a
    real compiled step of the same model) as the variant's file and loads it."""

    def build(self, variant):
        time.sleep(seconds)
        write_artifact(self.path(variant), self.key, variant, payload, seconds, None)
        self.built.append(variant)
        with self.kernels():
            return torch.compiler.load_compiled_function(io.BytesIO(payload))

    return build


BUILDER = """
import json, sys, torch
torch.set_num_threads(1)
import aiayn
from pathlib import Path
from aiayn.decoding import greedy_search
from aiayn.runtime.kept import KeptStep
from runtime.test_kept import keeping
model_dir, root, payload_file, sentence = sys.argv[1:5]
KeptStep._build = keeping(Path(payload_file).read_bytes(), seconds=1.0)  # slow, then the real payload
translator = aiayn.load(model_dir, "cpu")
runner = KeptStep(translator.model, build=True, root=Path(root))
ids = translator.tokenizers.source.encode(sentence) + [translator.config.eos_id]
greedy_search(runner, torch.tensor([ids]), 10)
print(json.dumps({"built": runner.built, "calls": dict(runner.calls)}))
"""


def test_two_builders_at_once_leave_one_valid_file(kept, tmp_path, model_dir):
    """Two processes that need the same missing step: one builds it under the lock, the other
    waits and loads that one; one whole file is left, and no temporary file."""
    key, _ = kept_directory(kept.model, None)
    payload = tmp_path / "payload"
    payload.write_bytes(read_artifact(kept.path, key)[1])
    root = tmp_path / "steps"
    shutil.copytree(kept.path.parent.parent / KERNELS, root / KERNELS)  # as built
    command = [sys.executable, "-c", BUILDER, str(model_dir), str(root), str(payload), SENTENCE]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))  # tests/: `keeping`
    workers = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
               for _ in range(2)]
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
        results.append(json.loads(out.splitlines()[-1]))
    assert sorted(len(r["built"]) for r in results) == [0, 1]
    assert all(r["calls"]["kept"] > 0 for r in results)
    files = sorted(p.name for p in root.glob("*/*") if p.is_file() and p.parent.name != KERNELS)
    assert files == [".lock", "greedy-single.step"]
    assert not [p for p in root.rglob("*") if p.name.endswith(".tmp")]
    [kept_file] = root.rglob("*.step")
    assert read_artifact(kept_file, key)[1] == payload.read_bytes()


def test_the_cache_command_lists_and_clears_kept_steps(kept, tmp_path, monkeypatch, capsys):
    """`aiayn cache list` shows each file with its size and model; `clear --stale` removes only
    what this machine cannot use; `clear` removes the rest."""
    from aiayn.cli.main import main

    monkeypatch.setenv("AIAYN_CACHE_DIR", str(tmp_path))
    usable = copy_entry(kept, tmp_path / "steps", kernels=False)
    other = tmp_path / "steps" / "other" / "beam-one.step"
    other.parent.mkdir()
    shutil.copyfile(usable, other)
    plant_key(other, threads=64)
    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert "2 kept decoding step file(s)" in out and "greedy-single.step" in out
    assert f"{usable.stat().st_size / 1e6:.1f} MB" in out and "not usable here: threads 64, here 1" in out
    assert main(["cache", "clear", "--stale"]) == 0
    assert usable.exists() and not other.exists() and "removed 1 stale" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0
    assert not (tmp_path / "steps").exists() and "removed 1 kept" in capsys.readouterr().out


def test_load_refuses_an_unknown_compile_value(model_dir):
    with pytest.raises(ConfigError, match="compile must be True, False or one of"):
        aiayn.load(model_dir, "cpu", compile="sometimes")


def test_a_cache_directory_that_cannot_be_written_leaves_decoding_eager(kept, tmp_path, model_dir, caplog):
    """No place to keep the step (here a file where its folder would be): one warning line, and
    the search decodes eagerly, the same output."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    runner = KeptStep(kept.model, build=True, root=blocker / "steps")
    with caplog.at_level(logging.WARNING, "aiayn"):
        ours = greedy_search(runner, source(kept.model, model_dir), 10).tokens
    [line] = caplog.messages
    assert "cannot keep the decoding step in" in line and runner.calls["kept"] == 0
    assert ours == greedy_search(kept.model, source(kept.model, model_dir), 10).tokens
