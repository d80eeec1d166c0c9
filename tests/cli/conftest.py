"""Fixtures of the command tests (`tests/cli` mirrors `aiayn/cli`, one file per command): the
tiny trained models of the packages the commands run, made once per session."""


from decoding.conftest import model_dir  # noqa: F401 (a fixture: a tiny translation model directory)
from inference.ensemble_dirs import ensemble_dirs  # noqa: F401 (a fixture: the ensemble tests' models)
from serve.conftest import lm_dir, translation_dir  # noqa: F401 (fixtures: the service's two models)
from threads import one_thread  # noqa: F401 (an autouse fixture: one intra-op thread)
