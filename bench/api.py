"""Agent API throughput: requests/s and latency of ``POST /{agent_id}/message``.

A real uvicorn serves the API on loopback in a child process (so the load generator does not
share its event loop or its core); the runtime is the real pipeline on a real SQLite file with a
hashing embedder (``--real-embedder`` for all-MiniLM-L6-v2) and a fake model that answers at once
(or after ``--model-latency`` s). Each of C concurrent clients talks in its own room and sends its
next message when the previous answer arrives; rate limits are off. Each level talks to a fresh
agent (an empty memory), so levels compare fairly.

    .venv/bin/python bench/api.py                       # 1, 16 and 64 clients
    .venv/bin/python bench/api.py --clients 1 8 --requests 300
    .venv/bin/python bench/api.py --no-series           # without the time series, to compare

The server records the time series (carrier.series: an on_turn_end hook, flushed every 5 s)
and applies the budgets' check before every model call, as ``carrier serve`` does, unless
``--no-series``; with them, each level ends with the time ``GET /metrics/series`` takes (an
hour of minutes of four series, the chart the console draws most) while nothing else runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from _served import ADMIN, CHARACTER, free_port, wait_ready


async def serve(
    data_dir: Path, port: int, latency: float, real_embedder: bool, series: bool
) -> None:
    """The child process: the API for one store, until killed."""
    from carrier.agents import AgentManager
    from carrier.api import ApiSettings
    from carrier.api import serve as serve_api
    from carrier.llm.base import ModelRequest
    from carrier.llm.fake import FunctionModel
    from carrier.memory.embedder import Embedder
    from carrier.memory.fake import HashEmbedder
    from carrier.memory.sqlite import SQLiteStore
    from carrier.series import open_host_series
    from carrier.settings import load_settings

    async def answer(request: ModelRequest) -> str:
        if latency:
            await asyncio.sleep(latency)
        if request.purpose == "facts":
            return "[]"
        return f"<response><actions>REPLY</actions><text>echo: {request.query}</text></response>"

    settings = load_settings(
        {
            "CARRIER_DATA_DIR": str(data_dir),
            "CARRIER_ADMIN_TOKEN": ADMIN,
            "CARRIER_LOG_LEVEL": "WARNING",
        }
    )
    embedder: Embedder
    if real_embedder:
        from carrier.memory.sentence import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder()
    else:
        embedder = HashEmbedder()
    limits = ApiSettings(rate_per_minute=1e9, rate_burst=1_000_000)
    async with SQLiteStore(path=settings.store_path) as store:
        model = FunctionModel(answer)
        manager = AgentManager(
            store=store,
            embedder=embedder,
            settings=settings,
            environ={},
            model_factory=lambda character: model,
            client_factories={},
        )
        host = await open_host_series(settings, manager) if series else None
        try:
            await serve_api(manager, settings, host="127.0.0.1", port=port, api_settings=limits)
        finally:
            await manager.close()
            if host is not None:
                await host.aclose()


async def new_agent(url: str, label: str) -> str:
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}
    ) as http:
        created = await http.post("/agents", json={**CHARACTER, "name": f"Bench {label}"})
        agent_id: str = created.raise_for_status().json()["id"]
        (await http.post(f"/agents/{agent_id}/start")).raise_for_status()
    return agent_id


async def run_level(url: str, agent_id: str, clients: int, total: int) -> dict[str, float]:
    per_client = max(1, total // clients)
    latencies: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {ADMIN}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=120) as http:

        async def client(n: int) -> None:
            nonlocal errors
            for i in range(per_client):
                body = {"text": f"message {i} from {n}", "user_id": f"user-{clients}-{n}"}
                started = time.perf_counter()
                response = await http.post(f"/{agent_id}/message", json=body)
                latencies.append(time.perf_counter() - started)
                if response.status_code != 200:
                    errors += 1

        began = time.perf_counter()
        await asyncio.gather(*(client(n) for n in range(clients)))
        elapsed = time.perf_counter() - began
    latencies.sort()
    return {
        "clients": clients,
        "requests": len(latencies),
        "errors": errors,
        "rps": len(latencies) / elapsed,
        "p50": statistics.median(latencies) * 1000,
        "p95": latencies[max(0, int(len(latencies) * 0.95) - 1)] * 1000,
    }


async def time_series_reads(url: str, agent_id: str, reads: int = 20) -> float:
    """The median time of ``GET /metrics/series`` (an hour of minutes, four series), in ms."""
    params = {
        "name": ["turns", "cost_usd", "latency.generate", "latency.turn"],
        "agent_id": agent_id,
    }
    took = []
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60
    ) as http:
        for _ in range(reads):
            started = time.perf_counter()
            (await http.get("/metrics/series", params=params)).raise_for_status()
            took.append(time.perf_counter() - started)
    return statistics.median(took) * 1000


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="carrier-bench-api-") as tmp:
        port = free_port()
        child = [sys.executable, __file__, "--serve", tmp, "--port", str(port)]
        child += ["--model-latency", str(args.model_latency)]
        child += ["--real-embedder"] if args.real_embedder else []
        child += ["--no-series"] if args.no_series else []
        server = await asyncio.create_subprocess_exec(*child)
        url = f"http://127.0.0.1:{port}"
        try:
            await wait_ready(url)
            await run_level(url, await new_agent(url, "warm-up"), 4, 40)
            embedder = "all-MiniLM-L6-v2" if args.real_embedder else "hash embedder"
            print(
                f"POST /{{agent_id}}/message, real uvicorn on loopback, SQLite, {embedder}, "
                f"fake model ({args.model_latency * 1000:.0f} ms), "
                f"time series {'off' if args.no_series else 'on'}"
            )
            print(
                f"{'clients':>8} {'requests':>9} {'errors':>7} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8}"
            )
            for clients in args.clients:
                # A fresh agent per level: every level starts from an empty memory.
                agent_id = await new_agent(url, f"level {clients}")
                r = await run_level(url, agent_id, clients, max(args.requests, clients * 4))
                read = (
                    ""
                    if args.no_series
                    else f"  series read {await time_series_reads(url, agent_id):.1f} ms"
                )
                print(
                    f"{r['clients']:>8.0f} {r['requests']:>9.0f} {r['errors']:>7.0f} "
                    f"{r['rps']:>8.1f} {r['p50']:>8.1f} {r['p95']:>8.1f}{read}"
                )
        finally:
            server.terminate()
            await server.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--requests", type=int, default=400, help="requests per level")
    parser.add_argument("--model-latency", type=float, default=0.0)
    parser.add_argument("--real-embedder", action="store_true")
    parser.add_argument(
        "--no-series", action="store_true", help="serve without the time series and budgets"
    )
    parser.add_argument("--serve", metavar="DATA_DIR", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.serve:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(
                serve(
                    Path(parsed.serve),
                    parsed.port,
                    parsed.model_latency,
                    parsed.real_embedder,
                    not parsed.no_series,
                )
            )
    else:
        asyncio.run(main(parsed))
