"""Decoder-only language models on any text file: windows, training, generation.

dataset (text -> token stream -> windows and batches) -> run (`aiayn lm train`) ->
generate (streamed sampling with the key/value cache, `aiayn lm generate`).
"""

from aiayn.lm.dataset import LMBatch, TokenWindows, window_starts
from aiayn.lm.generate import generate, generate_stream, stream_text

__all__ = ["LMBatch", "TokenWindows", "generate", "generate_stream", "stream_text", "window_starts"]
