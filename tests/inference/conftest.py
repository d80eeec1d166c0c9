"""The decoding tests' tiny model directory and one-thread setting serve here too, with the
ensemble tests' model directories (`ensemble_dirs`)."""

from decoding.conftest import model_dir, one_thread  # noqa: F401 (fixtures)
from inference.ensemble_dirs import ensemble_dirs  # noqa: F401 (a fixture)
