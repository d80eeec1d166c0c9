"""The decoding tests' tiny model directory serves here too."""

from decoding.conftest import model_dir  # noqa: F401 (fixture)
