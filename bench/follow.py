"""How soon a worker applies what the API changed: start → the bot identifies, stop → it leaves.

    python -m bench.follow [--rounds 10] [--mongo]

Real processes: one web (``carrier serve --no-clients``) and one worker (``carrier run
--no-api``) on one store (a SQLite file, or ``--mongo``: SecantusDB on loopback, standalone, so
the worker polls the change log), with the fake Discord in this process. Each round starts the
agent through the API and times until the worker's bot identifies, then stops it and times until
its session closes. ``identify``: the worker read the change, built the runtime, took the
connection's lease and identified; ``ready``: discord.py then waits for the guilds to stream in
(its ``guild_ready_timeout``, 2 s) before the client says it is connected; ``stop``: from the
stop call (made once the client was ready) until the bot left. Prints the median and the worst.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from bench._secantus import secantus_server
from clients.discord.fake import FakeDiscord
from tests.deploy.procs import ADMIN_TOKEN as ADMIN
from tests.deploy.procs import CarrierProcess, base_env, free_port

AGENT = {"name": "Pilot", "bio": ["Guides ships."], "clients": ["discord"]}


async def _until(check: object, bound_s: float = 60.0) -> float:
    """Seconds until ``check()`` holds (polled every 10 ms)."""
    began = time.perf_counter()
    while not check():  # type: ignore[operator]
        if time.perf_counter() - began > bound_s:
            raise SystemExit("the worker never applied the change")
        await asyncio.sleep(0.01)
    return time.perf_counter() - began


async def measure(rounds: int, root: Path, mongodb_uri: str | None) -> dict[str, list[float]]:
    async with FakeDiscord() as fake:
        fake.add_guild("Harbour", ["general"])
        env = base_env(
            root / "data",
            mongodb_uri=mongodb_uri,
            CARRIER_CHARACTERS_DIR=str(root / "characters"),
            CARRIER_TEST_DISCORD_URL=fake.base_url,
            DISCORD_API_TOKEN=fake.token,
        )
        (root / "characters").mkdir()
        port = free_port()
        web = CarrierProcess.start("serve", "--no-clients", "--port", str(port), env=env)
        await web.wait_for("agent API and console on")
        worker = CarrierProcess.start("run", "--no-api", env=env, name="worker")
        await worker.wait_for("running (Ctrl-C to stop)")
        times: dict[str, list[float]] = {"identify": [], "ready": [], "stop": []}

        def ready(n: int) -> bool:
            return sum("connected as" in line for line in worker.lines) == n

        try:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Bearer {ADMIN}"},
                timeout=60,
            ) as api:
                agent_id = (await api.post("/agents", json=AGENT)).json()["id"]
                for n in range(rounds):
                    assert (await api.post(f"/agents/{agent_id}/start")).status_code == 200
                    began = time.perf_counter()
                    times["identify"].append(
                        await _until(lambda n=n: len(fake.gateway.identifies) == n + 1)
                    )
                    await _until(lambda n=n: ready(n + 1))
                    times["ready"].append(time.perf_counter() - began)
                    assert (await api.post(f"/agents/{agent_id}/stop")).status_code == 200
                    times["stop"].append(await _until(lambda: not fake.gateway.sessions))
        finally:
            worker.stop()
            web.stop()
        return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--mongo", action="store_true", help="MongoDB (SecantusDB) store")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.mongo:
            (root / "db").mkdir()
            with secantus_server(root / "db") as server:
                uri = f"{server.uri}follow_{uuid.uuid4().hex[:8]}"
                times = asyncio.run(measure(args.rounds, root, uri))
        else:
            times = asyncio.run(measure(args.rounds, root, None))
    store = "MongoDB (SecantusDB, polled)" if args.mongo else "SQLite"
    print(f"{store}, {args.rounds} rounds: API call returned -> worker applied it")
    for what, seen in times.items():
        print(f"  {what:5}  median {statistics.median(seen):.2f} s   worst {max(seen):.2f} s")


if __name__ == "__main__":
    main()
