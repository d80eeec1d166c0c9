"""`with eval_mode(model):` inference without dropout or autograd, for any code that runs a model.

Decoding, evaluation, validation and the pictures all run a model that may be in the middle of
training; this puts it in eval mode under `torch.no_grad` and gives it back as it was.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Put `model` in eval mode (no dropout) under `torch.no_grad`, restoring its mode after."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        model.train(was_training)
