"""Decoder-only language models on any text file: windows and training.

dataset (text -> token stream -> windows and batches) -> run (`aiayn lm train`). Generation
(`aiayn lm generate`) is `aiayn.inference`'s `Generator` (`aiayn.load(DIR).generate(...)`).
"""

from aiayn.lm.dataset import LMBatch, TokenWindows, window_starts

__all__ = ["LMBatch", "TokenWindows", "window_starts"]
