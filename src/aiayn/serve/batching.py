"""Dynamic batching: one worker thread owns the model and decodes concurrent requests together.

Request handlers never touch the model. They `submit` a job and await its future; the
worker takes jobs off a queue in arrival order. Translation jobs that arrive within
`batch_wait_ms` of the first one waiting, and that ask for the same search (beam, alpha,
nbest), are joined into one batch, as long as its padded size (sentences x longest
sentence, in source tokens) stays within `max_batch_tokens`; the batch is decoded with one
`Translator.translate_nbest` call and each job gets its own slice of the results. A job that does not
fit, or asks for another search, waits (ahead of newer jobs) for the next batch. Generation
and attention jobs run one at a time. So torch never runs in two request threads at once.
Under load, jobs queue up while a batch decodes; the next batch takes all of them, and waits
`batch_wait_ms` after the last batch ended for the clients it just answered, so that N busy
clients keep sharing one batch rather than settling into two alternating halves.

`close()` stops accepting jobs, finishes every job already submitted, and ends the thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


class WorkerClosed(RuntimeError):
    """The worker is shutting down and takes no new jobs."""


@dataclass
class Job:
    """One request's work.

    Attributes:
        key: jobs with equal keys may share a batch (None: always alone).
        run: for a batchable job, `run(served, texts, batch_tokens)` decodes a whole batch's
            texts (jobs with one key share one `run`); otherwise `run(served)`.
        texts: the job's sentences (batchable jobs).
        lengths: tokens of each sentence (for the batch bound).
        future: receives the job's result (its slice of the batch) or exception.
        arrival: `time.monotonic()` when submitted.
    """

    key: Hashable | None
    run: Callable[..., Any]
    texts: list[str] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    future: Future = field(default_factory=Future)
    arrival: float = field(default_factory=time.monotonic)


@dataclass
class WorkerStats:
    """Counters for /health and the load benchmark: jobs submitted, started and finished
    (answered or failed), and the translation batches run."""

    submitted: int = 0
    jobs: int = 0
    completed: int = 0
    batches: int = 0
    batched_sentences: int = 0
    largest_batch: int = 0


def padded_tokens(num_sentences: int, longest: int) -> int:
    """Padded source tokens of a batch: its sentences times its longest sentence."""
    return num_sentences * longest


class BatchWorker:
    """The one thread that runs the model.

    Args:
        served: the model behind the service (a `ServedModel`), passed to each job's `run`.
        max_batch_tokens: the most padded source tokens in one batch (a single larger
            request still runs, alone; the translator splits it by the same bound).
        batch_wait_ms: how long a job may wait for others to join its batch.
    """

    def __init__(self, served: Any, max_batch_tokens: int = 4096, batch_wait_ms: float = 5.0) -> None:
        if max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be >= 1, got {max_batch_tokens}")
        if batch_wait_ms < 0:
            raise ValueError(f"batch_wait_ms must be >= 0, got {batch_wait_ms}")
        self.served = served
        self.max_batch_tokens = max_batch_tokens
        self.batch_wait_s = batch_wait_ms / 1000.0
        self.stats = WorkerStats()
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._deferred: deque[Job] = deque()  # taken off the queue but left for a later batch
        self._lock = threading.Lock()
        self._closing = False
        self._draining = False  # the worker has seen the end-of-jobs marker
        self._free_since = 0.0  # when the worker finished its last batch (time.monotonic())
        self._thread = threading.Thread(target=self._loop, name="aiayn-serve-worker", daemon=True)

    # ------------------------------------------------------------ caller side
    def start(self) -> None:
        self._thread.start()

    def submit(self, job: Job) -> Future:
        """Queue a job; its future gets the result. Raises `WorkerClosed` once closing."""
        with self._lock:
            if self._closing:
                raise WorkerClosed("the service is shutting down")
            self._queue.put(job)
            self.stats.submitted += 1
        return job.future

    def close(self, timeout: float | None = None) -> None:
        """Take no more jobs, finish those submitted, and stop the thread."""
        with self._lock:
            if not self._closing:
                self._closing = True
                self._queue.put(None)  # after every accepted job
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def queued(self) -> int:
        """Jobs waiting (approximate)."""
        return self._queue.qsize() + len(self._deferred)

    # ------------------------------------------------------------ worker side
    def _loop(self) -> None:
        while True:
            first = self._next_job()
            if first is None:
                return
            batch = self._collect(first) if first.key is not None else [first]
            self._execute(batch)
            self._free_since = time.monotonic()

    def _next_job(self) -> Job | None:
        """The oldest job: deferred ones first; None when closing and nothing is left."""
        if self._deferred:
            return self._deferred.popleft()
        if self._draining:
            return None
        job = self._queue.get()
        if job is None:
            self._draining = True
            return self._deferred.popleft() if self._deferred else None
        return job

    def _collect(self, first: Job) -> list[Job]:
        """`first` and the jobs that may join it: same key, within the token bound, arriving
        within `batch_wait` of `first` (or of the end of the last batch, if `first` waited for
        it: then the clients just answered have time to send their next request and join,
        instead of the clients splitting into two groups that alternate at half the batch)."""
        batch, size, longest = [first], len(first.texts), max(first.lengths, default=0)
        full = False

        def take(job: Job) -> bool:
            nonlocal size, longest, full
            if job.key != first.key:
                return False
            new_longest = max(longest, *job.lengths) if job.lengths else longest
            if padded_tokens(size + len(job.texts), new_longest) > self.max_batch_tokens:
                full = True
                return False
            batch.append(job)
            size, longest = size + len(job.texts), new_longest
            return True

        for job in list(self._deferred):
            if full:
                break
            if take(job):
                self._deferred.remove(job)
        deadline = max(first.arrival, self._free_since) + self.batch_wait_s
        while not full and not self._draining:
            remaining = deadline - time.monotonic()
            try:
                job = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if job is None:
                self._draining = True
                break
            if not take(job):
                self._deferred.append(job)
        return batch

    def _execute(self, batch: list[Job]) -> None:
        """Run a batch; every job's future gets its result or its exception. When a batch of
        several jobs fails, each job is run again alone, so one bad request fails alone."""
        live = [job for job in batch if job.future.set_running_or_notify_cancel()]  # drop cancelled
        if not live:
            return
        self.stats.jobs += len(live)
        try:
            results = self._run(live)
        except Exception as error:
            if len(live) == 1:
                live[0].future.set_exception(error)
            else:
                for job in live:
                    try:
                        job.future.set_result(self._run([job])[0])
                    except Exception as single_error:
                        job.future.set_exception(single_error)
        else:
            for job, result in zip(live, results, strict=True):
                job.future.set_result(result)
        self.stats.completed += len(live)

    def _run(self, jobs: list[Job]) -> list[Any]:
        """Each job's result: one decoding call for the whole batch."""
        if jobs[0].key is None:
            return [jobs[0].run(self.served)]
        texts = [text for job in jobs for text in job.texts]
        self.stats.batches += 1
        self.stats.batched_sentences += len(texts)
        self.stats.largest_batch = max(self.stats.largest_batch, len(texts))
        flat = jobs[0].run(self.served, texts, self.max_batch_tokens)
        results, start = [], 0
        for job in jobs:
            results.append(flat[start : start + len(job.texts)])
            start += len(job.texts)
        return results
