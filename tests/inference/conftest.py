"""The decoding tests' tiny model directory and one-thread setting serve here too."""

from decoding.conftest import model_dir, one_thread  # noqa: F401 (fixtures)
