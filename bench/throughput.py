"""Throughput of one agent behind the real API: turns/s and latency with N closed-loop
conversations and a model that answers in exactly 1 s, against the ideal N turns/s.

The server is the real ``carrier serve --no-clients`` in a child process: the real SQLite store,
the real all-MiniLM-L6-v2 embedder (the packaged model, offline) and the real model path (the
lean call of ``carrier/llm/_direct.py``; litellm with ``--env CARRIER_MODEL_DIRECT=false``)
calling ``openai/bench-model`` at a loopback OpenAI-compatible server (``bench/_model_server.py``,
a process of its own) that answers every call after ``--latency`` seconds with a new text. Each
conversation talks in its own room and sends its next message as soon as its answer arrives.
Each level talks to a fresh agent (an empty memory), warms up, then is measured for
``--seconds``:

- turns/s, p50 / p95 / max latency, errors (and 429s, waited out as the server asks);
- CPU per turn (the server process's CPU time over the turns), and the cores it used: the whole
  process, its event loop (the main thread) and its busiest other threads; and the cores the
  load generator (this process) used, which shares the machine;
- where a turn's time goes, stage by stage (mean ms, from the API's ``/metrics``, which sums every
  turn's trace timings);
- the targets: ≥ 0.75·N turns/s or the embedding-bound limit (the embedder's batched rate,
  measured here first, over the texts a turn embeds), whichever is lower, and p95 ≤ 2.0 s.

    .venv/bin/python bench/throughput.py                             # 50, 100, 200: 60 s each
    .venv/bin/python bench/throughput.py --levels 50 --seconds 20 --warmup 5
    .venv/bin/python bench/throughput.py --label before --json /tmp/before.json
    .venv/bin/python bench/throughput.py --env CARRIER_EMBED_THREADS=1 --label t1

The machine is shared: compare runs made alternately, not one run against a figure from another
day.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp
import httpx
from _served import (
    ADMIN,
    AUTH,
    cpu_between,
    cpu_sample,
    free_port,
    new_agent,
    stage_means,
    stage_totals,
    stop_agent,
    wait_ready,
)

ROOT = Path(__file__).resolve().parents[1]
_WORDS = [
    "weather",
    "weekend",
    "project",
    "garden",
    "dinner",
    "concert",
    "holiday",
    "football",
    "recipe",
    "travel",
    "book",
    "movie",
    "birthday",
    "museum",
    "podcast",
    "hiking",
    "camera",
    "guitar",
    "painting",
    "coffee",
    "beach",
    "market",
    "library",
    "puzzle",
    "sunset",
    "lecture",
    "bakery",
    "festival",
    "harbor",
    "island",
    "train",
]


def message_text(conversation: int, turn: int) -> str:
    """A new sentence of ~15 words: never the same twice, so every message is embedded."""
    rng = random.Random(conversation * 100_003 + turn)
    a, b, c = rng.sample(_WORDS, 3)
    return (
        f"Yesterday I was telling my friends about the {a} and the {b}; what do you think "
        f"about a {c} this time? ({conversation}.{turn})"
    )


def server_env(model_url: str, data_dir: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CARRIER_", "OPENAI_"))}
    env.update(
        {
            "CARRIER_DATA_DIR": str(data_dir),
            "CARRIER_ADMIN_TOKEN": ADMIN,
            "CARRIER_MODEL": "openai/bench-model",
            "CARRIER_API_BASE": model_url,
            "CARRIER_LOG_LEVEL": "WARNING",
            "CARRIER_RATE_PER_MINUTE": "1000000000",
            "CARRIER_RATE_BURST": "1000000",
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONPATH": str(ROOT),
        }
    )
    env.update(extra)
    return env


async def batched_rate(
    texts: int, batch: int, threads: int | None, engine: str | None = None
) -> float:
    """Texts/s of the embedder's best case: one model call per ``batch`` distinct texts, in this
    process while the server is idle (the same model, the same package, the server's threads:
    ``threads``, and engine: ``engine``, or the embedder's own defaults when None)."""
    from carrier.memory.sentence import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(
        cache_size=0, batch_size=batch, threads=threads, engine=engine
    )
    await embedder.load()
    warm = [message_text(-1, i) for i in range(batch)]
    await embedder.embed(warm)
    sample = [message_text(-2, i) for i in range(texts)]
    began = time.perf_counter()
    for i in range(0, texts, batch):
        await embedder.embed(sample[i : i + batch])
    return texts / (time.perf_counter() - began)


class Level:
    """N conversations talking to one agent until told to stop."""

    def __init__(self, url: str, agent_id: str, n: int, tag: str) -> None:
        self.url, self.agent_id, self.n, self.tag = url, agent_id, n, tag
        self.window: tuple[float, float] | None = None
        self.latencies: list[float] = []
        self.errors: dict[str, int] = {}
        self.rejected = 0
        self.stop = asyncio.Event()

    def _note(self, started: float, finished: float, error: str | None) -> None:
        w = self.window
        if w is None or not (w[0] <= started and finished <= w[1]):
            return  # warm-up, or a turn that straddles the window's edge
        if error is None:
            self.latencies.append(finished - started)
        else:
            self.errors[error] = self.errors.get(error, 0) + 1

    async def conversation(self, http: aiohttp.ClientSession, c: int) -> None:
        turn = 0
        while not self.stop.is_set():
            body = {
                "text": message_text(c, turn),
                "user_id": f"user-{self.tag}-{c}",
                "room_id": f"room-{self.tag}-{c}",
            }
            turn += 1
            started = time.perf_counter()
            error: str | None = None
            try:
                async with http.post(f"{self.url}/{self.agent_id}/message", json=body) as response:
                    await response.read()
                    status, retry = response.status, response.headers.get("Retry-After")
                if status == 429:  # overloaded: wait as asked, then go on
                    self.rejected += 1
                    await asyncio.sleep(min(float(retry or 1), 5.0))
                    continue
                if status != 200:
                    error = str(status)
            except (aiohttp.ClientError, TimeoutError) as exc:
                error = type(exc).__name__
            self._note(started, time.perf_counter(), error)


async def first_turns(url: str) -> None:
    agent_id = await new_agent(url, "Bench warm-up")
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=120) as http:
        for i in range(3):
            body = {"text": message_text(-3, i), "user_id": "warm-up"}
            (await http.post(f"/{agent_id}/message", json=body)).raise_for_status()
    await stop_agent(url, agent_id)


async def run_level(
    url: str, pid: int, model_url: str, n: int, args: argparse.Namespace
) -> dict[str, Any]:
    agent_id = await new_agent(url, f"Bench {args.label} {n}")
    level = Level(url, agent_id, n, f"{n}-{agent_id[:6]}")
    # Idle connections are dropped before the server's keep-alive timeout (5 s) closes them, so
    # a conversation that waited out a 429 does not send on a connection being closed. aiohttp,
    # not httpx, for the load: with a hundred requests in flight httpx's pool costs several ms
    # of CPU a request (bench/llm_call.py), and a load generator short of CPU measures itself.
    connector = aiohttp.TCPConnector(limit=n + 10, keepalive_timeout=3.0)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, headers=AUTH, timeout=timeout) as http:
        talking = [asyncio.create_task(level.conversation(http, c)) for c in range(n)]
        await asyncio.sleep(args.warmup)
        stages0, cpu0, calls0 = await stage_totals(url), cpu_sample(pid), await _calls(model_url)
        own0 = time.process_time()
        began = time.perf_counter()
        level.window = (began, began + args.seconds)
        await asyncio.sleep(args.seconds)
        cpu1 = cpu_sample(pid)
        own = (time.process_time() - own0) / (time.perf_counter() - began)
        stages1, calls1 = await stage_totals(url), await _calls(model_url)
        level.stop.set()
        await asyncio.gather(*talking)
    await stop_agent(url, agent_id)
    lat = sorted(level.latencies)
    turns = len(lat)
    cpu = cpu_between(pid, cpu0, cpu1)
    calls = {k: calls1.get(k, 0) - calls0.get(k, 0) for k in calls1}
    return {
        "conversations": n,
        "seconds": args.seconds,
        "turns": turns,
        "turns_per_s": turns / args.seconds,
        "p50_s": statistics.median(lat) if lat else None,
        "p95_s": lat[max(0, int(turns * 0.95) - 1)] if lat else None,
        "max_s": lat[-1] if lat else None,
        "errors": sum(level.errors.values()),
        "error_kinds": level.errors,
        "rejected_429": level.rejected,
        "cpu_ms_per_turn": cpu["cpu_s"] / turns * 1000 if turns else None,
        "cpu": cpu,
        "stages_ms": stage_means(stages0, stages1),
        "load_generator_cores": own,
        "model_calls": calls,
    }


async def _calls(model_url: str) -> dict[str, int]:
    async with httpx.AsyncClient(timeout=10) as http:
        stats: dict[str, int] = (await http.get(model_url.removesuffix("/v1") + "/stats")).json()
    return stats


def texts_per_turn(result: dict[str, Any]) -> float:
    """Texts a turn embeds: its message, its reply, and each fact the evaluator learned."""
    turns = max(result["turns"], 1)
    return 2.0 + result["model_calls"].get("facts", 0) / turns


def report(result: dict[str, Any], rate: float) -> None:
    n = result["conversations"]
    bound = rate / texts_per_turn(result)
    result["embedding_bound_turns_per_s"] = bound
    target = min(0.75 * n, bound)
    result["target_turns_per_s"] = target
    p95 = result["p95_s"]
    ms = lambda s: "-" if s is None else f"{s:.2f}"  # noqa: E731
    cpu = result["cpu"]
    print(
        f"{n:>5} {result['turns_per_s']:>8.1f} {ms(result['p50_s']):>6} {ms(p95):>6} "
        f"{ms(result['max_s']):>6} {result['errors']:>6} {result['rejected_429']:>5} "
        f"{result['cpu_ms_per_turn'] or 0:>8.1f} {cpu['cores']:>6.2f} "
        f"{cpu['event_loop_cores']:>5.2f}   ≥{target:.1f}/s & p95≤2.0 s"
    )
    stages = ", ".join(f"{k} {v:.0f}" for k, v in result["stages_ms"].items())
    print(f"      stages (mean ms): {stages}")
    print(
        f"      other threads (cores): {cpu['other_threads_cores']}; model calls: "
        f"{result['model_calls']}; embedding-bound limit {bound:.0f}/s; load generator "
        f"{result['load_generator_cores']:.2f} cores"
    )


async def main(args: argparse.Namespace) -> dict[str, Any]:
    extra = dict(item.split("=", 1) for item in args.env)
    with tempfile.TemporaryDirectory(prefix="carrier-bench-throughput-") as tmp:
        model_port, port = free_port(), free_port()
        model_url = f"http://127.0.0.1:{model_port}/v1"
        model = await asyncio.create_subprocess_exec(
            sys.executable,
            str(Path(__file__).with_name("_model_server.py")),
            "--port",
            str(model_port),
            "--latency",
            str(args.latency),
        )
        url = f"http://127.0.0.1:{port}"
        carrier = [sys.executable, "-m", "carrier", "serve", "--no-clients", "--port", str(port)]
        server = await asyncio.create_subprocess_exec(
            *carrier,
            env=server_env(model_url, Path(tmp), extra),
            stdout=asyncio.subprocess.DEVNULL,
        )
        try:
            await wait_ready(model_url.removesuffix("/v1"), path="/stats")
            await wait_ready(url, seconds=120)
            # The first turns load what the server loads lazily (the embedder, litellm): done
            # here, before the batched rate is measured and before any level.
            await first_turns(url)
            threads = extra.get("CARRIER_EMBED_THREADS")
            rate = await batched_rate(
                args.embed_texts,
                64,
                int(threads) if threads else None,
                extra.get("CARRIER_EMBED_ENGINE"),
            )
            out: dict[str, Any] = {
                "label": args.label,
                "latency_s": args.latency,
                "env": extra,
                "batched_embed_texts_per_s": rate,
                "levels": [],
            }
            print(
                f"[{args.label}] carrier serve on loopback, SQLite, all-MiniLM-L6-v2, model path → "
                f"loopback model answering in {args.latency:.1f} s; batched embedding "
                f"{rate:.0f} texts/s; warm-up {args.warmup:.0f} s, {args.seconds:.0f} s a level"
                + (f"; {' '.join(args.env)}" if args.env else "")
            )
            print(
                f"{'conv':>5} {'turns/s':>8} {'p50':>6} {'p95':>6} {'max':>6} {'errors':>6} "
                f"{'429':>5} {'cpu ms/t':>8} {'cores':>6} {'loop':>5}   target"
            )
            for n in args.levels:
                result = await run_level(url, server.pid, model_url, n, args)
                report(result, rate)
                out["levels"].append(result)
            return out
        finally:
            for child in (server, model):
                if child.returncode is None:
                    child.send_signal(signal.SIGTERM)
                    try:
                        await asyncio.wait_for(child.wait(), 30)
                    except TimeoutError:
                        child.kill()
                        await child.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[50, 100, 200])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds a level")
    parser.add_argument("--warmup", type=float, default=15.0, help="unmeasured seconds first")
    parser.add_argument("--latency", type=float, default=1.0, help="the model's answer time")
    parser.add_argument("--embed-texts", type=int, default=640, help="texts for the batched rate")
    parser.add_argument("--label", default="run", help="names the run in the output and JSON")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set in the server's environment (e.g. CARRIER_EMBED_THREADS=1); repeatable",
    )
    parsed = parser.parse_args()
    figures = asyncio.run(main(parsed))
    if parsed.json:
        parsed.json.write_text(json.dumps(figures, indent=2))
