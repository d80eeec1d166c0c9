"""Tiny classifiers run fastest on one thread (and leave the shared cores to others)."""

from threads import one_thread  # noqa: F401 (an autouse fixture: one intra-op thread)
