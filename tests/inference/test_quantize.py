"""`quantize="int8"` / `--quantize int8`: per-channel int8 weights, activations quantized on the
fly (the fused CPU kernel, or per row where it is missing), close to float32; a value we do not
support and int8 on an int8 CTranslate2 export are one clear error."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from aiayn.cli.main import main
from aiayn.core.errors import ConfigError
from aiayn.inference import load
from aiayn.runtime import int8 as int8_linear
from aiayn.runtime.int8 import Int8Linear, quantize_rows


@pytest.mark.parametrize("fused", [True, False])
def test_int8_linear_is_close_to_float32(fused, monkeypatch):
    if fused and not int8_linear.fused_kernel_available():
        pytest.skip("this PyTorch has no fused int8 CPU kernel")
    monkeypatch.setattr(int8_linear, "fused_kernel_available", lambda: fused)
    torch.manual_seed(0)
    linear = nn.Linear(64, 48)
    x = torch.randn(5, 7, 64)
    exact = linear(x)
    approx = Int8Linear(linear)(x)
    assert approx.shape == exact.shape
    assert (approx - exact).abs().max() <= 0.02 * exact.abs().max()
    part = Int8Linear(linear).project_features(x, 16, 40)  # part of the outputs, as attention projects K, V
    assert (part - exact[..., 16:40]).abs().max() <= 0.02 * exact.abs().max()
    quantized = Int8Linear(linear)
    quantized(x)
    assert (len(quantized.parts[0, 48]) == 1) == fused  # packed for the fused kernel, or not


def test_quantize_rows_scales_each_row():
    x = torch.tensor([[1.0, -2.0, 0.5], [100.0, 50.0, -25.0]])
    values, scale = quantize_rows(x)
    assert values.dtype == torch.int8 and values.abs().max() == 127
    assert torch.allclose(values.float() * scale, x, rtol=0.01, atol=0.01 * 100)
    assert scale[0, 0] == pytest.approx(2 / 127) and scale[1, 0] == pytest.approx(100 / 127)


def test_quantized_translator_decodes_and_keeps_parameters(model_dir):
    plain, quantized = load(model_dir, "cpu"), load(model_dir, "cpu", quantize="int8")
    assert any(isinstance(m, Int8Linear) for m in quantized.network.modules())
    assert not any(isinstance(m, Int8Linear) for m in quantized.model.modules())
    assert quantized.parameters == plain.parameters
    assert quantized.model.state_dict().keys() == plain.model.state_dict().keys()
    outputs = quantized.translate(["ein hund läuft", "ja"], beam=4)
    assert len(outputs) == 2 and all(isinstance(o, str) for o in outputs)


def test_unsupported_quantize_value(model_dir, capsys):
    with pytest.raises(ConfigError, match="quantize must be one of"):
        load(model_dir, "cpu", quantize="int4")
    assert main(["translate", "--model", str(model_dir), "--text", "ja", "--quantize", "int4"]) == 2
    err = capsys.readouterr().err
    assert "--quantize" in err and len(err.strip().splitlines()) == 1


def test_int8_on_ctranslate2_exports(model_dir, tmp_path, capsys):
    pytest.importorskip("ctranslate2", reason="needs the optional extra 'export'")
    from aiayn.export import export_ctranslate2

    float32 = export_ctranslate2(model_dir, tmp_path / "f32")
    assert load(float32, "cpu", quantize="int8").runtime.compute_type.startswith("int8")
    int8 = export_ctranslate2(model_dir, tmp_path / "int8", quantization="int8")
    with pytest.raises(ConfigError, match="already quantized"):
        load(int8, "cpu", quantize="int8")
    assert main(["translate", "--model", str(int8), "--text", "ja", "--quantize", "int8"]) == 2
    err = capsys.readouterr().err
    assert "already quantized" in err and len(err.strip().splitlines()) == 1
