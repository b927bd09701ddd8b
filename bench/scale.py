"""Several workers over MongoDB: turns/s and jobs/s with 1 and 2 ``carrier run --no-api``.

    .venv/bin/python bench/scale.py                           # the issue's sizes (a few minutes)
    .venv/bin/python bench/scale.py --workers 1 2 --seconds 60 --conversations 100 --bots 4

Turns (this file): an I/O-bound workload, as a deployment meets it. One SecantusDB (a
MongoDB-compatible server, on loopback) holds everything; per worker count a fresh database, a
fresh fake Discord in this process (:class:`clients.discord.fake.FakeDiscord`, several bots), one
web (``carrier serve --no-clients``) and N workers — real ``carrier`` processes
(:mod:`tests.deploy._carrier`: the hashing embedder, a fake model answering after
``--model-latency`` seconds, Discord pointed at the fake). ``--bots`` agents are created and
started through the web's API, each with its own bot token (its character references its own
``DISCORD_API_TOKEN_<i>``), in a guild of its own: a worker holds each token's connection under
a lease, so turns spread over the workers only through several bots. ``--conversations``
people talk at once (a member in a channel each, spread over the bots' guilds); each mentions
its bot and sends the next message as soon as the previous one is answered.

Measured per worker count: turns/s (replies seen in the window after ``--warmup``), p50/p95 of
message posted → reply seen at the fake, every message answered exactly once (replies matched
by ``message_reference``: duplicates, unanswered and replies to nothing are counted, and any
makes the run fail), which worker holds each bot's connection (the ``conn:discord:`` leases),
and the CPU each process used in the window. Jobs (``bench/_scale_jobs.py``, its
:func:`run_jobs`): scheduled Instagram posts published against the fake Graph API. One table
at the end. Run by hand, never by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import httpx  # noqa: E402

from bench._scale_jobs import run_jobs  # noqa: E402
from bench._secantus import secantus_server  # noqa: E402
from carrier.assemble import open_store  # noqa: E402
from carrier.character import Character  # noqa: E402
from carrier.fleet.base import FleetStore  # noqa: E402
from carrier.settings import load_settings  # noqa: E402
from carrier.types import MemoryKind  # noqa: E402
from clients.discord import connection_key  # noqa: E402
from clients.discord.fake import Bot, FakeDiscord  # noqa: E402
from tests.deploy.procs import CarrierProcess, base_env, free_port  # noqa: E402

BOUND_S = 180.0
"""How long a start-up step may take before the bench gives up (against hanging only)."""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of every core since boot: the machine, others' work included."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


class Replies:
    """Follows what the bots sent at the fake: replies by the message they answer."""

    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        self.count: Counter[int] = Counter()
        self.first_at: dict[int, float] = {}
        self.unreferenced = 0
        self._seen = 0
        self._waiting: dict[int, asyncio.Future[float]] = {}

    async def follow(self) -> None:
        rest = self.fake.rest
        while True:
            async with rest.changed:
                await rest.changed.wait_for(lambda: len(rest.sent) > self._seen)
            new = rest.sent[self._seen :]
            self._seen += len(new)
            for sent in new:
                ref = sent.payload.get("message_reference")
                if not ref:
                    self.unreferenced += 1
                    continue
                answered = int(ref["message_id"])
                self.count[answered] += 1
                if answered not in self.first_at:
                    self.first_at[answered] = sent.at
                    waiter = self._waiting.pop(answered, None)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(sent.at)

    async def wait(self, message_id: int, bound_s: float) -> float | None:
        """When the first reply to ``message_id`` was seen; None if none came in ``bound_s``."""
        if message_id in self.first_at:
            return self.first_at[message_id]
        waiter = self._waiting.setdefault(message_id, asyncio.get_running_loop().create_future())
        try:
            return await asyncio.wait_for(waiter, bound_s)
        except TimeoutError:
            return None
        finally:
            self._waiting.pop(message_id, None)


def character(index: int) -> dict[str, Any]:
    return {
        "name": f"Pilot{index}",
        "bio": [f"Pilot{index} guides ships into harbour {index}."],
        "clients": ["discord"],
        # Every message answered (no per-person limit), so each one is a turn.
        "clientConfig": {"discord": {"rateLimit": False}},
        "settings": {"secrets": {"DISCORD_API_TOKEN": f"$DISCORD_API_TOKEN_{index}"}},
    }


async def until(check: Any, what: str, procs: list[CarrierProcess]) -> None:
    deadline = time.monotonic() + BOUND_S
    while not check():
        dead = [p for p in procs if p.proc.poll() is not None]
        if dead or time.monotonic() > deadline:
            logs = "\n\n".join(f"--- {p.name}\n{p.output[-3000:]}" for p in procs)
            raise RuntimeError(f"never: {what}\n{logs}")
        await asyncio.sleep(0.1)


async def run_turns(
    mongodb_uri: str, workers: int, args: argparse.Namespace, workdir: Path, server_pid: int
) -> dict[str, Any]:
    """One web and ``workers`` workers on a fresh database; the conversations; the figures."""
    async with FakeDiscord() as fake:
        guilds = [fake.add_guild(f"Harbour {i}", []) for i in range(1, args.bots + 1)]
        bots = [fake.add_bot(f"Pilot{i}", guilds=[g]) for i, g in enumerate(guilds, 1)]
        rooms: list[tuple[Bot, int, dict[str, Any]]] = []  # (bot, channel id, person)
        for c in range(args.conversations):  # round-robin over the bots' guilds
            b, j = c % args.bots, c // args.bots
            channel = fake.add_channel(guilds[b], f"room-{j}")
            rooms.append((bots[b], channel, fake.add_member(guilds[b], f"person-{b + 1}-{j}")))
        tokens = {f"DISCORD_API_TOKEN_{i}": bot.token for i, bot in enumerate(bots, 1)}
        (workdir / "characters").mkdir(parents=True, exist_ok=True)
        env = base_env(
            workdir / "data",
            mongodb_uri=mongodb_uri,
            CARRIER_CHARACTERS_DIR=str(workdir / "characters"),  # none: agents come by the API
            CARRIER_TEST_DISCORD_URL=fake.base_url,
            CARRIER_TEST_MODEL_DELAY=str(args.model_latency),
            **tokens,
        )
        port = free_port()
        procs: list[CarrierProcess] = []
        replies = Replies(fake)
        follower = asyncio.create_task(replies.follow())
        fleet = FleetStore.from_settings(load_settings(env))
        try:
            web = CarrierProcess.start(
                "serve", "--no-clients", "--port", str(port), env=env, name="web"
            )
            procs.append(web)
            for n in range(1, workers + 1):
                env_n = {**env, "CARRIER_WORKER_ID": f"w{n}"}
                procs.append(CarrierProcess.start("run", "--no-api", env=env_n, name=f"w{n}"))
            await web.wait_for("agent API and console on", bound_s=BOUND_S)
            for proc in procs[1:]:
                await proc.wait_for("running (Ctrl-C to stop)", bound_s=BOUND_S)
            await fleet.open()  # the processes made the store ready; this only reads leases
            headers = {"Authorization": f"Bearer {env['CARRIER_ADMIN_TOKEN']}"}
            agent_ids = []
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60
            ) as api:
                for i in range(1, args.bots + 1):
                    created = await api.post("/agents", json=character(i))
                    created.raise_for_status()
                    agent_ids.append(created.json()["id"])
                    started = await api.post(f"/agents/{agent_ids[-1]}/start")
                    started.raise_for_status()
            connected_ids = {bot.id for bot in bots}
            await until(
                lambda: {s.bot_id for s in fake.gateway.sessions if s.ready} >= connected_ids,
                "every bot connected",
                procs,
            )
            spread = await holders(fleet, bots, env)
            result = await converse(fake, replies, rooms, args, procs, server_pid)
            identifies = Counter(str(d.get("token")) for d in fake.gateway.identifies)
            result.update(
                workers=workers,
                spread=spread,
                identifies=sorted(identifies[bot.token] for bot in bots),
                spread_after=await holders(fleet, bots, env),
                unanswered_ended=await ended(env, agent_ids, result.pop("unanswered_ids")),
            )
            for proc in reversed(procs):
                proc.stop()
            return result
        finally:
            follower.cancel()
            for proc in procs:
                proc.kill()
            await fleet.close()
            if args.logs is not None:
                args.logs.mkdir(parents=True, exist_ok=True)
                for proc in procs:
                    (args.logs / f"{workers}w-{proc.name}.log").write_text(proc.output + "\n")


async def ended(env: dict[str, str], agent_ids: list[str], unanswered: set[int]) -> dict[str, int]:
    """Where the unanswered messages ended in the store: status (and reason) → how many;
    ``not stored`` for those no worker received."""
    if not unanswered:
        return {}
    found: Counter[str] = Counter()
    store = await open_store(load_settings(env))
    try:
        for agent_id in agent_ids:
            for memory in await store.get_memories(
                agent_id=agent_id, kinds=[MemoryKind.MESSAGE], limit=10**6, embeddings=False
            ):
                platform_id = memory.content.metadata.get("platform_message_id")
                if platform_id is not None and int(platform_id) in unanswered:
                    reason = f": {memory.error}" if memory.error else ""
                    found[f"{memory.status}{reason}"] += 1
    finally:
        await store.close()
    found["not stored"] = len(unanswered) - sum(found.values())
    return dict(found.most_common())


async def holders(fleet: FleetStore, bots: list[Bot], env: dict[str, str]) -> dict[str, list[str]]:
    """Who holds each bot's connection lease: worker → the bots' names."""
    names = {
        connection_key(Character.model_validate(character(i)), {}, env): bot.name
        for i, bot in enumerate(bots, 1)
    }
    now = fleet.now()
    held: dict[str, list[str]] = {}
    for lease in await fleet.leases("conn:discord:"):
        if lease.expires_at > now:
            key = lease.name.removeprefix("conn:discord:")
            held.setdefault(lease.owner, []).append(names.get(key, key))
    return {owner: sorted(names_) for owner, names_ in sorted(held.items())}


async def converse(
    fake: FakeDiscord,
    replies: Replies,
    rooms: list[tuple[Bot, int, dict[str, Any]]],
    args: argparse.Namespace,
    procs: list[CarrierProcess],
    server_pid: int,
) -> dict[str, Any]:
    """Every conversation at once until the deadline (or ``--turns``); the figures."""
    posted: dict[int, float] = {}  # message id -> when posted (perf_counter)
    undelivered = 0  # posts the fake could hand to no session of their bot (none connected)
    per_room = math.ceil(args.turns / len(rooms)) if args.turns else None
    start = time.perf_counter()
    warm = start + args.warmup
    deadline = warm + args.seconds if per_room is None else math.inf

    async def talk(c: int, bot: Bot, channel: int, person: dict[str, Any]) -> None:
        nonlocal undelivered
        k = 0
        while time.perf_counter() < deadline and (per_room is None or k < per_room):
            at = time.perf_counter()
            try:
                data = await fake.post(
                    person, f"<@{bot.id}> question {c}-{k}", channel=channel, mentions=[bot.user]
                )
            except RuntimeError:  # its bot had no connection for ~2 s: a finding, not a crash
                undelivered += 1
                k += 1
                continue
            posted[int(data["id"])] = at
            await replies.wait(int(data["id"]), args.reply_bound)
            k += 1

    pids = {p.name: p.proc.pid for p in procs} | {"secantus": server_pid}
    moved: list[str] = []  # a bot's new session after the first: when, and which bot

    async def watch() -> None:
        seen = {s.session_id for s in fake.gateway.sessions}
        names = {bot.id: bot.name for bot, _, _ in rooms}
        while True:
            for session in list(fake.gateway.sessions):
                if session.session_id not in seen:
                    seen.add(session.session_id)
                    at = time.perf_counter() - start
                    moved.append(f"{names.get(session.bot_id, session.bot_id)} at {at:.0f} s")
            await asyncio.sleep(0.2)

    watcher = asyncio.create_task(watch())
    talking = [asyncio.create_task(talk(c, *room)) for c, room in enumerate(rooms)]
    await asyncio.sleep(max(0.0, warm - time.perf_counter()))
    cpu_before = {name: cpu_s(pid) for name, pid in pids.items()}
    bench_before, machine_before = time.process_time(), machine_busy()
    window_start = time.perf_counter()
    await asyncio.gather(*talking)
    window_end = min(time.perf_counter(), deadline)
    cpu = {name: cpu_s(pid) - cpu_before[name] for name, pid in pids.items()}
    cpu["bench"] = time.process_time() - bench_before
    busy, total = (a - b for a, b in zip(machine_busy(), machine_before, strict=True))
    dead = [p.name for p in procs if p.proc.poll() is not None]
    if dead:
        raise RuntimeError(f"{', '.join(dead)} exited during the run")
    await asyncio.sleep(args.grace)  # a late second reply would show here
    watcher.cancel()
    in_window = [t for t in replies.first_at.values() if window_start <= t <= window_end]
    latencies = [
        (replies.first_at[m] - at) * 1000
        for m, at in posted.items()
        if m in replies.first_at and at >= window_start
    ]
    seconds = window_end - window_start
    return {
        "conversations": len(rooms),
        "posted": len(posted),
        "window_s": seconds,
        "turns": len(in_window),
        "turns_per_s": len(in_window) / seconds if seconds > 0 else 0.0,
        "p50_ms": statistics.median(latencies) if latencies else math.nan,
        "p95_ms": pct(latencies, 95) if latencies else math.nan,
        "once": sum(1 for m in posted if replies.count[m] == 1),
        "duplicates": sum(max(replies.count[m] - 1, 0) for m in posted),
        "unanswered": sum(1 for m in posted if replies.count[m] == 0),
        "unreferenced": replies.unreferenced + sum(1 for m in replies.count if m not in posted),
        "undelivered": undelivered,
        "unanswered_ids": {m for m in posted if replies.count[m] == 0},
        "reconnected": moved,
        "cpu_s": {name: round(value, 1) for name, value in cpu.items()},
        "machine_busy": busy / total if total else math.nan,
    }


def turns_row(r: dict[str, Any], jobs: dict[str, Any] | None) -> str:
    spread = "; ".join(f"{w}: {', '.join(b)}" for w, b in r["spread"].items())
    jobs_cells = (
        f"{jobs['jobs_per_s']:.2f} | {jobs['published']} / {jobs['duplicates']} / {jobs['lost']}"
        if jobs is not None
        else "not run | not run"
    )
    return (
        f"| {r['workers']} | {r['turns_per_s']:.1f} | {r['p50_ms'] / 1000:.2f} / "
        f"{r['p95_ms'] / 1000:.2f} s | {r['once']} / {r['duplicates']} / {r['unanswered']} | "
        f"{spread} | {jobs_cells} |"
    )


def cpu_line(r: dict[str, Any]) -> str:
    used = ", ".join(f"{name} {value:.1f} s" for name, value in r["cpu_s"].items())
    return (
        f"{r['workers']} worker(s): {r['turns']} turns in {r['window_s']:.1f} s "
        f"({r['posted']} messages posted, {r['undelivered']} found no connection); CPU in the window: {used}; both cores "
        f"{r['machine_busy']:.0%} busy (others' work included); identifies per bot "
        f"{r['identifies']} (new sessions during the run: {r['reconnected'] or 'none'}); "
        f"connections after the run: {r['spread_after']}"
        + (f"; the unanswered ended {r['unanswered_ended']}" if r["unanswered_ended"] else "")
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--bots", type=int, default=4, help="agents, each its own bot token")
    parser.add_argument("--model-latency", type=float, default=1.0, help="seconds a model call")
    parser.add_argument("--seconds", type=float, default=60.0, help="measured, after the warm-up")
    parser.add_argument("--turns", type=int, default=0, help="stop after about this many instead")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds not measured first")
    parser.add_argument("--grace", type=float, default=5.0, help="seconds to catch late replies")
    parser.add_argument("--reply-bound", type=float, default=120.0, help="gives up on a reply")
    parser.add_argument("--jobs", type=int, default=200, help="scheduled posts (0: no jobs)")
    parser.add_argument("--graph-latency", type=float, default=0.2, help="seconds a Graph call")
    parser.add_argument("--logs", type=Path, help="keep each process's output in this folder")
    args = parser.parse_args()
    if args.bots < 1 or args.conversations < args.bots:
        parser.error("--bots must be at least 1 and --conversations at least --bots")
    print(
        f"{args.conversations} conversations over {args.bots} bots, fake model "
        f"{args.model_latency * 1000:.0f} ms, hashing embedder, SecantusDB on loopback; "
        f"{f'{args.turns} turns' if args.turns else f'{args.seconds:.0f} s'} after a "
        f"{args.warmup:.0f} s warm-up; jobs: {args.jobs} posts, Graph {args.graph_latency * 1000:.0f} "
        f"ms a call; {os.cpu_count()} cores",
        flush=True,
    )
    turns: list[dict[str, Any]] = []
    jobs: list[dict[str, Any] | None] = []
    with tempfile.TemporaryDirectory(prefix="carrier-scale-") as tmp:
        root = Path(tmp)
        (root / "mongo").mkdir()
        with secantus_server(root / "mongo") as server:
            for n in args.workers:
                uri = f"{server.uri}scale_turns_{n}w_{uuid.uuid4().hex[:8]}"
                result = asyncio.run(run_turns(uri, n, args, root / f"turns-{n}w", server.pid))
                turns.append(result)
                print(cpu_line(result), flush=True)
            for n in args.workers:
                if not args.jobs:
                    jobs.append(None)
                    continue
                uri = f"{server.uri}scale_jobs_{n}w_{uuid.uuid4().hex[:8]}"
                done = run_jobs(
                    uri,
                    n,
                    jobs=args.jobs,
                    call_latency_s=args.graph_latency,
                    workdir=root / f"jobs-{n}w",
                    server_pid=server.pid,
                )
                jobs.append(done)
                print(
                    f"{n} worker(s), jobs: {done['jobs']} posts in {done['seconds']} s, "
                    f"{done['jobs_per_s']} posts/s, by worker {done['by_worker']}, "
                    f"at most {done['peak_publishing']} publishing at once, CPU {done['cpu_s']}",
                    flush=True,
                )
    print(
        "\n| workers | turns/s | latency p50 / p95 | answered once / twice or more / "
        "unanswered | connections held | jobs/s | jobs once / duplicates / lost |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r, j in zip(turns, jobs, strict=True):
        print(turns_row(r, j))
    failed = [
        f"{r['workers']} worker(s): {r['duplicates']} answered more than once, "
        f"{r['unanswered']} unanswered, {r['unreferenced']} replies to no message of the run, "
        f"{r['undelivered']} messages found no connection"
        for r in turns
        if r["duplicates"] or r["unanswered"] or r["unreferenced"] or r["undelivered"]
    ]
    failed += [
        f"{j['workers']} worker(s): jobs not exactly once: {j}"
        for j in jobs
        if j is not None and not j["published_once"]
    ]
    for line in failed:
        print(f"FAILED: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
