"""The CTranslate2 and Transformers formats derive d_k from d_model and the number of heads: a
model whose `head_dim` (Table 3 row B) is another width is refused with one line naming it, before
anything is written; `head_dim` = d_model / h given explicitly is the paper's model and exports."""

from __future__ import annotations

import pytest

from aiayn.cli.main import main
from aiayn.core.errors import ConfigError
from aiayn.export import export_ctranslate2, export_huggingface

from .helpers import make_translation_dir

TARGETS = {"ctranslate2": export_ctranslate2, "huggingface": export_huggingface}


@pytest.mark.parametrize("target", TARGETS)
def test_heads_of_another_width_are_refused(target, tmp_path, capsys):
    make_translation_dir(tmp_path / "model", "post-sinusoidal-shared", head_dim=8)  # 2 heads of 8
    with pytest.raises(ConfigError, match=r"ModelConfig\.head_dim=8 .*d_model = 32"):
        TARGETS[target](tmp_path / "model", tmp_path / "out")
    assert main(["export", target, "--model", str(tmp_path / "model"), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err.strip()
    assert "ModelConfig.head_dim=8" in error and len(error.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_head_dim_d_model_over_h_given_explicitly_exports(tmp_path):
    make_translation_dir(tmp_path / "model", "post-sinusoidal-shared", head_dim=16)  # 2 heads of 16
    assert (export_ctranslate2(tmp_path / "model", tmp_path / "ct2") / "model.bin").exists()
