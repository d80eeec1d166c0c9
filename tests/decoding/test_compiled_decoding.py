"""The compiled decoding step (`aiayn.load(..., compile=True)`, `aiayn.runtime.compiled`) finds what
the eager decoder finds, in a few graphs, and refuses what it cannot compile."""

import pytest
import torch

from aiayn import load
from aiayn.cli.main import main
from aiayn.core.errors import ConfigError
from aiayn.decoding import beam_search
from aiayn.inference.torch_translator import pad_batch
from aiayn.runtime.compiled import compiler_available
from aiayn.runtime.prepacked import PrepackedLinear, prepacking_available

from .helpers import tiny_transformer
from .reference_beam_search import assert_same_search, reference_beam_search

pytestmark = pytest.mark.skipif(not prepacking_available(), reason="needs PyTorch's oneDNN (CPU) linear ops")
needs_compiler = pytest.mark.skipif(not compiler_available(), reason="torch.compile needs a C++ compiler")


def _texts(count: int) -> list[str]:
    from shared_dates import splits

    return [source for source, _ in splits()["test"][:count]]


@needs_compiler
def test_compiled_beam_and_greedy_search_same_as_eager(dates_run, shared_kept_steps):
    """The trained `dates` model on held-out inputs: beam 4 (n-best 2) and greedy, the same
    hypotheses (scores may differ in the last bits); the step compiles without graph breaks into
    at most a handful of graphs for every batch shape."""
    from torch._dynamo.utils import counters

    eager, compiled = load(dates_run, "cpu"), load(dates_run, "cpu", compile=True)
    counters.clear()
    texts = _texts(40)
    for beam in (4, 1):
        # sentences finish and leave: rows shrink to one (greedy on a single sentence, the fifth
        # kept variant, is tests/runtime/test_kept.py's)
        for size in (40, 7, 1) if beam > 1 else (40, 7):
            batch = texts[:size]
            ours = compiled.translate_nbest(batch, beam=beam, nbest=min(beam, 2))
            theirs = eager.translate_nbest(batch, beam=beam, nbest=min(beam, 2))
            assert [[h.text for h in hyps] for hyps in ours] == [[h.text for h in hyps] for hyps in theirs]
            for mine, reference in zip(ours, theirs, strict=True):
                assert [h.score for h in mine] == pytest.approx([h.score for h in reference], abs=1e-4)
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert 1 <= counters["stats"]["unique_graphs"] <= 6
    assert compiled.runner.calls["kept"] > 4 * compiled.runner.calls["eager"]  # most steps compiled
    # And what the plain reference beam search (no cache, one sentence at a time) finds.
    runner, config = compiled.runner, compiled.config
    ids = [[*row, config.eos_id] for row in compiled.tokenizers.source.encode_batch(texts)]
    src = pad_batch(ids, config.pad_id, torch.device("cpu"))
    ours = beam_search(runner, src, 4, 0.6, max_len_extra=10, nbest=2)
    assert_same_search(ours, reference_beam_search(runner.network, src, 4, 0.6, max_len_extra=10, nbest=2))


@needs_compiler
def test_translate_cli_with_compile(dates_run, capsys, shared_kept_steps):
    text = _texts(1)[0]
    assert main(["translate", "--model", str(dates_run), "--text", text]) == 0
    eager = capsys.readouterr().out
    assert main(["translate", "--model", str(dates_run), "--text", text, "--compile"]) == 0
    assert capsys.readouterr().out == eager


def test_compile_refuses_what_it_does_not_compile(dates_run, tmp_path, monkeypatch):
    from aiayn.export import export_ctranslate2

    pytest.importorskip("ctranslate2")
    exported = export_ctranslate2(dates_run, tmp_path / "ct2")
    with pytest.raises(ConfigError, match="compile applies to aiayn's own translation models.*CTranslate2"):
        load(exported, "cpu", compile=True)
    import aiayn.runtime.compiled as compiling

    monkeypatch.setattr(compiling.shutil, "which", lambda name: None)
    with pytest.raises(ConfigError, match="compile on CPU needs a C\\+\\+ compiler"):
        load(dates_run, "cpu", compile=True)
    with pytest.raises(RuntimeError, match="needs a C\\+\\+ compiler"):
        compiling.CompiledStep(load(dates_run, "cpu").model)


def test_prepacked_linear_operator_needs_a_prepared_slice():
    """The compiled step's linear operator computes x W^T + b from the prepacked form of a slice
    made by `PrepackedLinear.part`, and refuses a plain tensor."""
    model = tiny_transformer(0, vocab_size=24)
    linear = PrepackedLinear(model.output_projection)
    weight, bias = linear.part(0, 10)
    x = torch.randn(3, weight.size(1))
    expected = torch.nn.functional.linear(x, model.output_projection.weight[:10])
    result = torch.ops.aiayn.prepacked_linear(x, weight, bias)
    torch.testing.assert_close(result, expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="needs a weight slice prepared by its layer"):
        torch.ops.aiayn.prepacked_linear(x, weight.clone(), bias)
