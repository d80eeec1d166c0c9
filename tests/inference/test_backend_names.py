"""The PyTorch-or-CTranslate2 choice is a *backend*: `TorchBackend`; the earlier name
`TorchRuntime` still works for one release and warns."""

from __future__ import annotations

import pytest

from aiayn.inference import base
from aiayn.inference.torch_translator import TorchTranslator


def test_the_earlier_name_still_works_and_warns() -> None:
    with pytest.warns(DeprecationWarning, match="TorchRuntime is deprecated.*TorchBackend"):
        from aiayn.inference.base import TorchRuntime
    assert TorchRuntime is base.TorchBackend and issubclass(TorchTranslator, base.TorchBackend)
    with pytest.raises(AttributeError, match="no attribute 'TorchRuntimes'"):
        base.TorchRuntimes  # noqa: B018
