"""Fixtures of the explorer tests: the tiny translation model of the attention pictures."""


from plots.conftest import model_dir  # noqa: F401 (a fixture: a tiny translation model directory)
from threads import one_thread  # noqa: F401 (an autouse fixture: one intra-op thread)
