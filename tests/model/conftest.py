"""Model tests run on tiny tensors: one intra-op thread is faster than two fighting for
shared cores (the previous setting is restored after each test)."""

from threads import one_thread  # noqa: F401 (an autouse fixture: one intra-op thread)
