"""The batching worker with a recording engine: what is decoded together, in what order, and
that shutdown finishes every job."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from aiayn.serve.batching import BatchWorker, Job, WorkerClosed


class RecordingEngine:
    """Translates by upper-casing; records each call; fails on 'boom'; slow when told."""

    name, task, max_input_tokens = "fake", "translation", 100

    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[list[str]] = []
        self.delay = delay
        self.busy = threading.Lock()
        self.overlapped = False

    def translate(self, texts, beam, alpha, nbest, batch_tokens):
        if not self.busy.acquire(blocking=False):
            self.overlapped = True  # two threads inside the engine at once
            self.busy.acquire()
        try:
            self.calls.append(list(texts))
            time.sleep(self.delay)
            if "boom" in texts:
                raise ValueError("boom")
            return [[(text.upper(), -1.0)] * nbest for text in texts]
        finally:
            self.busy.release()


def translate_job(texts: list[str], key=("translate", 4, 0.6, 1)) -> Job:
    def run(engine, batch_texts, batch_tokens):
        return engine.translate(batch_texts, 4, 0.6, key[3], batch_tokens)

    return Job(key=key, run=run, texts=texts, lengths=[len(t) + 1 for t in texts])


@pytest.fixture
def make_worker():
    workers = []

    def make(engine, **options) -> BatchWorker:
        worker = BatchWorker(engine, **options)
        worker.start()
        workers.append(worker)
        return worker

    yield make
    for worker in workers:
        worker.close(timeout=10)


def test_jobs_within_the_wait_share_one_call_and_get_their_own_results(make_worker):
    engine = RecordingEngine()
    worker = make_worker(engine, batch_wait_ms=300)
    jobs = [translate_job(["a", "b"]), translate_job(["c"]), translate_job(["d", "e", "f"])]
    futures = [worker.submit(job) for job in jobs]
    results = [f.result(timeout=10) for f in futures]
    assert engine.calls == [["a", "b", "c", "d", "e", "f"]]
    assert [[nbest[0][0] for nbest in r] for r in results] == [["A", "B"], ["C"], ["D", "E", "F"]]
    assert (worker.stats.batches, worker.stats.jobs, worker.stats.largest_batch) == (1, 3, 6)


def test_the_token_bound_splits_batches(make_worker):
    engine = RecordingEngine()
    # each sentence is 4 tokens ("abc" + <eos>): at most 3 sentences (12 padded tokens) per batch
    worker = make_worker(engine, batch_wait_ms=300, max_batch_tokens=12)
    futures = [worker.submit(translate_job(["abc"])) for _ in range(7)]
    assert [f.result(timeout=10)[0][0][0] for f in futures] == ["ABC"] * 7
    assert [len(call) for call in engine.calls] == [3, 3, 1]
    big = worker.submit(translate_job(["abcdefgh"] * 4))  # over the bound alone: still runs, alone
    assert len(big.result(timeout=10)) == 4 and engine.calls[-1] == ["abcdefgh"] * 4


def test_other_searches_wait_for_their_own_batch_in_order(make_worker):
    engine = RecordingEngine()
    worker = make_worker(engine, batch_wait_ms=300)
    nbest2 = ("translate", 4, 0.6, 2)
    futures = [worker.submit(translate_job(["a"])), worker.submit(translate_job(["b"], key=nbest2)),
               worker.submit(translate_job(["c"])), worker.submit(translate_job(["d"], key=nbest2))]
    results = [f.result(timeout=10) for f in futures]
    assert engine.calls == [["a", "c"], ["b", "d"]]
    assert len(results[1][0]) == 2 and len(results[0][0]) == 1


def test_a_lone_job_waits_at_most_batch_wait(make_worker):
    worker = make_worker(RecordingEngine(), batch_wait_ms=50)
    started = time.monotonic()
    worker.submit(translate_job(["a"])).result(timeout=10)
    assert time.monotonic() - started < 5  # not stuck waiting for company


def test_clients_answered_by_a_batch_may_join_the_next(make_worker):
    engine = RecordingEngine(delay=1.0)
    worker = make_worker(engine, batch_wait_ms=200)
    first = worker.submit(translate_job(["a"]))
    time.sleep(0.6)  # "a" is decoding: its 200 ms to gather company are over
    waiting = worker.submit(translate_job(["b"]))  # queued while "a" decodes
    first.result(timeout=10)
    returning = worker.submit(translate_job(["c"]))  # the client of "a" sends its next request
    assert waiting.result(timeout=10) == [[("B", -1.0)]] and returning.result(timeout=10) == [[("C", -1.0)]]
    assert engine.calls == [["a"], ["b", "c"]]  # not two alternating half batches


def test_a_failing_job_fails_alone(make_worker):
    engine = RecordingEngine()
    worker = make_worker(engine, batch_wait_ms=300)
    good, bad, other = (worker.submit(translate_job(t)) for t in (["a"], ["boom"], ["c"]))
    assert good.result(timeout=10) == [[("A", -1.0)]] and other.result(timeout=10) == [[("C", -1.0)]]
    with pytest.raises(ValueError, match="boom"):
        bad.result(timeout=10)
    assert engine.calls[0] == ["a", "boom", "c"]  # tried together, then each alone


def test_cancelled_jobs_are_skipped(make_worker):
    engine = RecordingEngine(delay=0.3)
    worker = make_worker(engine, batch_wait_ms=0)
    first = worker.submit(translate_job(["a"]))
    time.sleep(0.1)  # the worker is busy with it
    gone = worker.submit(translate_job(["gone"]))
    assert gone.cancel()  # e.g. the client went away
    assert first.result(timeout=10) == [[("A", -1.0)]]
    worker.close(timeout=10)
    assert ["gone"] not in engine.calls


def test_many_threads_never_run_the_engine_at_once(make_worker):
    engine = RecordingEngine(delay=0.002)
    worker = make_worker(engine, batch_wait_ms=2, max_batch_tokens=8)
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda i: worker.submit(translate_job([f"s{i}"])).result(30), range(64)))
    assert [r[0][0][0] for r in results] == [f"S{i}" for i in range(64)]
    assert not engine.overlapped
    assert sum(len(call) for call in engine.calls) == 64 and len(engine.calls) < 64


def test_close_finishes_every_submitted_job_then_refuses(make_worker):
    engine = RecordingEngine(delay=0.05)
    worker = make_worker(engine, batch_wait_ms=0, max_batch_tokens=2)
    futures = [worker.submit(translate_job([str(i)])) for i in range(10)]
    worker.close(timeout=30)
    assert [f.result(timeout=0)[0][0][0] for f in futures] == [str(i) for i in range(10)]
    with pytest.raises(WorkerClosed):
        worker.submit(translate_job(["late"]))


def test_unbatched_jobs_run_alone():
    engine = RecordingEngine()
    worker = BatchWorker(engine, batch_wait_ms=100)
    worker.start()
    try:
        futures = [worker.submit(Job(key=None, run=lambda e, i=i: f"job{i}")) for i in range(3)]
        assert [f.result(timeout=10) for f in futures] == ["job0", "job1", "job2"]
        assert worker.stats.batches == 0 and worker.stats.jobs == 3
    finally:
        worker.close(timeout=10)
