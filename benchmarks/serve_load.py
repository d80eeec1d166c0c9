"""Load test of `aiayn serve`: does dynamic batching turn concurrent clients into throughput?

    python benchmarks/serve_load.py                  # the dates model; benchmarks/results/serve.json
    python benchmarks/serve_load.py --model runs/multi30k --input test.de --seconds 60
    python benchmarks/serve_load.py --ctranslate2 runs/dates-ct2   # also CTranslate2 (an export dir)

Starts `aiayn serve` on 127.0.0.1 (a free port; nothing else is contacted), then for 1, 8
and 32 concurrent clients, each with its own keep-alive connection, sends single-sentence
`POST /v1/translate` requests (beam 4, the API's default) back to back for `--seconds`
(30 by default) per client count, and stops the server (SIGTERM). The seconds are split into
`--rounds` (3) that alternate the client counts (1, 8, 32, 1, 8, 32, ...), each after a short
unmeasured warm-up, so that the shared machine's drifting load hits every count alike.
Reports per client count: sentences/s (the median over rounds), p50/p95/p99 latency (ms, all
requests), the error count (any answer but a 200 with one translation, or a broken
connection), and from the server's /health the mean number of sentences decoded per batch.
Without `--model`, the `dates` model of `benchmarks/runs/dates` is used (trained by
`aiayn train` first if missing, ~3 minutes).

Target (issue 17): with 32 clients, at least 3x the sentences/s of 1 client, and 0 errors.
Written to benchmarks/results/serve.json: {"clients_1": {"sentences_per_s", "p50_ms",
"p95_ms", "p99_ms", "errors", ...}, "clients_8": ..., "clients_32": ..., "settings": {...}};
with `--ctranslate2 DIR`, the same figures for that directory under "ctranslate2".
The clients share the machine with the server; they are plain asyncio sockets, so they cost
little CPU next to it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aiayn.runtime.cpu import cpu_model

REPO = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = REPO / "benchmarks" / "runs" / "dates"
RESULTS = REPO / "benchmarks" / "results" / "serve.json"
HOST = "127.0.0.1"
WARMUP_SECONDS = 3.0
REQUEST_TIMEOUT = 120.0


def dates_sentences(count: int) -> list[str]:
    from aiayn.data.synthetic import make_task

    pairs = make_task("dates", seed=17, num_train=0, num_valid=0, num_test=count)["test"]
    return [source for source, _ in pairs]


def ensure_dates_model(path: Path) -> Path:
    if not (path / "model.safetensors").is_file():
        print(f"training the dates model into {path} (aiayn train, ~3 minutes)", flush=True)
        subprocess.run(
            [sys.executable, "-m", "aiayn", "train", "--out", str(path), "--overwrite",
             "--set", "train.progress=none"],
            check=True,
        )
    return path


# ------------------------------------------------------------------ the server
class Server:
    """`aiayn serve` in a child process on 127.0.0.1 and a free port."""

    def __init__(self, model: Path, options: list[str]) -> None:
        command = [sys.executable, "-m", "aiayn", "serve", "--model", str(model), "--host", HOST,
                   "--port", "0", *options]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if match is None:
            self.process.kill()
            raise SystemExit(f"serve_load: the server did not start: {line!r}")
        self.port = int(match.group(1))

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


# ------------------------------------------------------------------ the clients
class Connection:
    """One keep-alive HTTP/1.1 connection sending JSON requests (plain asyncio streams)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(HOST, self.port)
        data = b"" if body is None else json.dumps(body).encode()
        head = (f"{method} {path} HTTP/1.1\r\nHost: {HOST}:{self.port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n")
        self.writer.write(head.encode() + data)
        await self.writer.drain()
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("the server closed the connection")
        status = int(status_line.split()[1])
        length, keep_alive = 0, True
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.lower() == "content-length":
                length = int(value)
            elif name.lower() == "connection" and value.strip().lower() == "close":
                keep_alive = False
        payload = await self.reader.readexactly(length)
        if not keep_alive:
            self.close()
        return status, json.loads(payload) if payload else None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def client(port: int, sentences: list[str], offset: int, until: float, beam: int,
                 records: list[tuple[float, bool]]) -> None:
    """Send one sentence at a time until `until`; record (latency s, ok) of each request."""
    connection = Connection(port)
    i = offset
    while time.monotonic() < until:
        sentence = sentences[i % len(sentences)]
        i += 1
        started = time.monotonic()
        try:
            body = {"text": [sentence], "beam": beam}
            status, body = await asyncio.wait_for(
                connection.request("POST", "/v1/translate", body), REQUEST_TIMEOUT
            )
            ok = status == 200 and len(body["translations"]) == 1 and len(body["translations"][0]) == 1
        except (OSError, ConnectionError, asyncio.TimeoutError, ValueError, KeyError, TypeError,
                asyncio.IncompleteReadError):
            ok = False
            connection.close()
        records.append((time.monotonic() - started, ok))
    connection.close()


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


async def health(port: int) -> dict[str, Any]:
    connection = Connection(port)
    try:
        return (await connection.request("GET", "/health"))[1]
    finally:
        connection.close()


async def run_slice(port: int, sentences: list[str], clients: int, seconds: float, beam: int,
                    records: list[tuple[float, bool]]) -> dict[str, float]:
    """`clients` concurrent clients for a short warm-up, then `seconds` measured into `records`;
    returns this slice's sentences/s and the server's batch counters over it."""
    warmup_until = time.monotonic() + WARMUP_SECONDS
    await asyncio.gather(*(client(port, sentences, 997 * c, warmup_until, beam, []) for c in range(clients)))
    before = await health(port)
    start = len(records)
    started = time.monotonic()
    until = started + seconds
    await asyncio.gather(*(client(port, sentences, 101 * c, until, beam, records) for c in range(clients)))
    elapsed = time.monotonic() - started
    after = await health(port)
    ok = sum(1 for _, good in records[start:] if good)
    return {
        "sentences_per_s": ok / elapsed,
        "seconds": elapsed,
        "batches": after["batches"] - before["batches"],
        "batched_sentences": after["batched_sentences"] - before["batched_sentences"],
    }


def summary(
    records: list[tuple[float, bool]], slices: list[dict[str, float]], loads: list[float]
) -> dict[str, Any]:
    """One client count's figures: the median sentences/s of its slices, pooled latencies."""
    latencies = [latency * 1000 for latency, ok in records if ok]
    batches = sum(s["batches"] for s in slices)
    batched = sum(s["batched_sentences"] for s in slices)
    return {
        "sentences_per_s": round(statistics.median(s["sentences_per_s"] for s in slices), 2),
        "p50_ms": round(percentile(latencies, 50), 2),
        "p95_ms": round(percentile(latencies, 95), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "errors": sum(1 for _, ok in records if not ok),
        "requests": len(records),
        "seconds": round(sum(s["seconds"] for s in slices), 2),
        "sentences_per_s_per_round": [round(s["sentences_per_s"], 2) for s in slices],
        "mean_batch_sentences": round(batched / batches, 2) if batches else None,
        "load_average_1min": [round(x, 2) for x in loads],
    }


def measure(model: Path, options: list[str], sentences: list[str], clients: list[int], seconds: float,
            beam: int, rounds: int) -> dict[str, Any]:
    """The figures of one engine on a fresh server: `rounds` rounds, each giving every client
    count `seconds / rounds` in turn, so that drifting machine load hits all counts alike."""
    server = Server(model, options)
    records: dict[int, list[tuple[float, bool]]] = {count: [] for count in clients}
    slices: dict[int, list[dict[str, float]]] = {count: [] for count in clients}
    loads: dict[int, list[float]] = {count: [] for count in clients}
    try:
        engine = asyncio.run(health(server.port))["engine"]
        for round_index in range(rounds):
            for count in clients:
                loads[count].append(os.getloadavg()[0])
                run = run_slice(server.port, sentences, count, seconds / rounds, beam, records[count])
                figures = asyncio.run(run)
                slices[count].append(figures)
                print(f"  {engine}, round {round_index + 1}, {count} client(s): "
                      f"{figures['sentences_per_s']:.1f} sentences/s", flush=True)
    finally:
        status = server.stop()
    results: dict[str, Any] = {f"clients_{c}": summary(records[c], slices[c], loads[c]) for c in clients}
    results["engine"] = engine
    results["server_exit_status"] = status
    return results


def table(name: str, figures: dict[str, Any], clients: list[int]) -> str:
    rows = [f"| {name} | clients | sentences/s | p50 ms | p95 ms | p99 ms | errors | sentences per batch |",
            "|---|---|---|---|---|---|---|---|"]
    for count in clients:
        f = figures[f"clients_{count}"]
        rows.append(f"| | {count} | {f['sentences_per_s']} | {f['p50_ms']} | {f['p95_ms']} | {f['p99_ms']} | "
                    f"{f['errors']} | {f['mean_batch_sentences']} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="model directory (default: the dates model)")
    parser.add_argument("--input", type=Path, help="sentences, one per line (default: generated dates)")
    parser.add_argument("--ctranslate2", type=Path, metavar="DIR",
                        help="also measure this CTranslate2 export directory (its model.bin)")
    parser.add_argument("--seconds", type=float, default=30.0, help="measured seconds per client count")
    parser.add_argument("--rounds", type=int, default=3,
                        help="split each count's seconds into this many alternating rounds (default 3)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2, help="the server's torch threads (default 2)")
    parser.add_argument("--device", default="cpu", help="the server's device (default cpu)")
    parser.add_argument("--batch-wait-ms", type=float, default=5.0)
    parser.add_argument("--max-batch-tokens", type=int, default=4096)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if not 1 <= args.seconds <= 600:
        parser.error("--seconds must be in [1, 600]")
    if not 1 <= args.rounds <= args.seconds:
        parser.error("--rounds must be in [1, --seconds]")

    model = args.model or ensure_dates_model(DEFAULT_MODEL)
    if args.input is not None:
        sentences = [line for line in args.input.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        sentences = dates_sentences(1000)
    options = ["--threads", str(args.threads), "--device", args.device,
               "--batch-wait-ms", str(args.batch_wait_ms), "--max-batch-tokens", str(args.max_batch_tokens)]
    import torch

    settings = {
        "model": str(model.resolve().relative_to(REPO) if model.resolve().is_relative_to(REPO) else model),
        "sentences": "generated dates (make_task('dates', seed=17) test split)" if args.input is None
        else str(args.input),
        "request": f"one sentence per POST /v1/translate, beam {args.beam}",
        "seconds_per_client_count": args.seconds,
        "rounds": args.rounds,
        "warmup_seconds": WARMUP_SECONDS,
        "server_threads": args.threads,
        "device": args.device,
        "batch_wait_ms": args.batch_wait_ms,
        "max_batch_tokens": args.max_batch_tokens,
        "host": HOST,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "command": "python " + " ".join(sys.argv),
    }
    trained = model / "results.json"  # what `aiayn train` wrote: the model's held-out score
    if trained.is_file():
        test = json.loads(trained.read_text(encoding="utf-8")).get("test", {})
        settings["model_test_scores"] = {k: v for k, v in test.items() if k in ("exact_match", "bleu")}
    print(f"aiayn engine on {settings['model']}:", flush=True)
    results: dict[str, Any] = measure(model, options, sentences, args.clients, args.seconds, args.beam,
                                      args.rounds)
    if args.ctranslate2 is not None:
        print(f"ctranslate2 engine on {args.ctranslate2}:", flush=True)
        results["ctranslate2"] = measure(args.ctranslate2, options, sentences, args.clients, args.seconds,
                                         args.beam, args.rounds)
        results["ctranslate2"]["settings"] = settings | {"model": str(args.ctranslate2)}
    results["settings"] = settings

    from aiayn.core.files import atomic_write_text

    atomic_write_text(args.out, json.dumps(results, indent=2) + "\n")
    print(table("aiayn", results, args.clients))
    if "ctranslate2" in results:
        print(table("ctranslate2", results["ctranslate2"], args.clients))
    low, high = args.clients[0], args.clients[-1]
    for name, figures in [("aiayn", results), ("ctranslate2", results.get("ctranslate2"))]:
        if figures is None:
            continue
        speeds = [figures[f"clients_{c}"]["sentences_per_s"] for c in (low, high)]
        ratio = speeds[1] / max(speeds[0], 1e-9)
        errors = sum(figures[f"clients_{c}"]["errors"] for c in args.clients)
        verdict = "met" if ratio >= 3 and errors == 0 else "NOT met"
        print(f"{name}: {high} clients give {ratio:.2f}x the sentences/s of {low}; {errors} errors "
              f"(target >= 3x and 0 errors: {verdict})")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
