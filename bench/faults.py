"""Turns against a model server that fails on purpose: how many are answered, how long they
take, and that none is lost or answered twice.

A seeded OpenAI-compatible server on loopback (``tests/faults/fault_server.py``) answers 30%
of requests with a fault: 500, 429 with Retry-After, a hang (30 s), a body that is not JSON, an
empty ``choices`` list, or (streams) a cut after the first chunk. The runtime is built from
settings as ``carrier run`` builds it (``CARRIER_MODEL`` at the server, the per-attempt timeout
and the turn deadline, a character with a fallback model or none), on a real SQLite store;
the embedder is the hashing fake (the model path is what is measured). ``--concurrency``
people talk at once, each in their own room, one message after the other; a quarter of the
turns stream. Each configuration runs on a fresh store:

- with a healthy fallback model (the same server, a model it never fails);
- without one: what retries alone save.

Figures: the share answered; p50/p95/max turn time (a turn is ``AgentRuntime.handle`` from call
to return, the reply delivered); lost (an inbound message not stored, or not in a final state,
or a turn that raised); doubled (more than one reply stored for one inbound message).

    .venv/bin/python bench/faults.py
    .venv/bin/python bench/faults.py --turns 200 --timeout 2 --deadline 5 --hang 6   # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from carrier.assemble import build_runtime
from carrier.character import Character
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.runtime import AgentRuntime
from carrier.settings import load_settings
from carrier.types import Author, Channel, MemoryKind, MemoryStatus, Message, RoomKind
from tests.faults.fault_server import FaultMix, FaultServer

FINAL = {MemoryStatus.PROCESSED, MemoryStatus.FAILED, MemoryStatus.IGNORED}


@dataclass
class Outcome:
    seconds: float
    streamed: bool
    status: MemoryStatus | None = None
    replies: int = 0
    reason: str | None = None
    raised: str | None = None
    cut: bool = False


@dataclass
class Run:
    name: str
    outcomes: list[Outcome] = field(default_factory=list)
    inbound: dict[str, MemoryStatus] = field(default_factory=dict)
    replies_per_inbound: collections.Counter[str] = field(default_factory=collections.Counter)
    served: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    wall: float = 0.0


def persona(fallback: bool) -> Character:
    settings: dict[str, Any] = {"modelFallbacks": ["openai/fallback"]} if fallback else {}
    return Character.model_validate(
        {
            "name": "Harbor",
            "bio": ["Harbor hosts a game-dev community."],
            "settings": settings,
            "messageExamples": [
                [
                    {"user": "{{user1}}", "content": {"text": "hello"}},
                    {"user": "Harbor", "content": {"text": "Ahoy!"}},
                ]
            ],
        }
    )


async def one_turn(runtime: AgentRuntime, person: int, n: int, streamed: bool) -> Outcome:
    message = Message(
        platform="bench",
        author=Author(platform_id=f"person-{person}", name=f"Person {person}"),
        channel=Channel(platform_id=f"dm-{person}", kind=RoomKind.DM),
        text=f"question {n} from person {person}: when is the next jam?",
    )
    shown: list[str] = []

    async def on_chunk(piece: str) -> None:
        shown.append(piece)

    started = time.perf_counter()
    try:
        result = await runtime.handle(message, on_chunk=on_chunk if streamed else None)
        outbox = getattr(runtime, "outbox", None)  # delivered, as a client would mark it
        if outbox is not None:
            await outbox.deliver(result.replies)
    except Exception as exc:  # a turn that raised counts as lost
        return Outcome(time.perf_counter() - started, streamed, raised=type(exc).__name__)
    return Outcome(
        seconds=time.perf_counter() - started,
        streamed=streamed,
        status=result.status,
        replies=len(result.replies),
        reason=result.reason,
        cut=any(m.content.metadata.get("cut") for m in result.replies),
    )


async def run(args: argparse.Namespace, *, fallback: bool) -> Run:
    server = FaultServer(
        default=FaultMix(rate=args.rate),
        mixes={"fallback": FaultMix.healthy()},
        seed=args.seed,
        hang=args.hang,
        retry_after=args.retry_after,
    )
    server.start()
    report = Run("with a healthy fallback" if fallback else "no fallback")
    with tempfile.TemporaryDirectory(prefix="carrier-bench-faults-") as tmp:
        settings = load_settings(
            {
                "CARRIER_DATA_DIR": tmp,
                "CARRIER_MODEL": "openai/primary",
                "CARRIER_API_BASE": server.base_url,
                "CARRIER_MODEL_TIMEOUT": str(args.timeout),
                "CARRIER_TURN_DEADLINE": str(args.deadline),
            }
        )
        async with SQLiteStore(path=Path(tmp) / "carrier.db") as store:
            runtime, _ = build_runtime(
                persona(fallback),
                settings=settings,
                store=store,
                embedder=HashEmbedder(),
                environ={},
            )
            await runtime.start()
            await runtime.model.prepare()
            numbers = iter(range(args.turns))

            async def person(p: int) -> None:
                for n in numbers:  # shared: the people take the next turn number in turn
                    streamed = n % round(1 / args.stream_share) == 0
                    report.outcomes.append(await one_turn(runtime, p, n, streamed))

            started = time.perf_counter()
            await asyncio.gather(*(person(p) for p in range(args.concurrency)))
            report.wall = time.perf_counter() - started
            memories = await store.get_memories(
                agent_id=runtime.agent_id, kinds=[MemoryKind.MESSAGE], limit=100_000
            )
            for memory in memories:
                if memory.content.in_reply_to:
                    report.replies_per_inbound[memory.content.in_reply_to] += 1
                else:
                    report.inbound[memory.id] = memory.status
            await runtime.stop()
    server.stop()
    report.served = server.counts
    return report


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def show(report: Run, args: argparse.Namespace) -> None:
    outcomes = report.outcomes
    answered = [o for o in outcomes if o.status is MemoryStatus.PROCESSED and o.replies]
    failed = [o for o in outcomes if o.status is MemoryStatus.FAILED]
    times = sorted(o.seconds for o in outcomes)
    p50 = statistics.median(times)
    p95 = times[min(len(times) - 1, round(0.95 * len(times)) - 1)]
    lost = sum(1 for o in outcomes if o.raised) + (len(outcomes) - len(report.inbound))
    lost += sum(1 for status in report.inbound.values() if status not in FINAL)
    doubled = sum(1 for n in report.replies_per_inbound.values() if n > 1)
    requests = sum(report.served.values())
    faults = sum(n for (_, outcome), n in report.served.items() if outcome != "ok")
    streamed = [o for o in outcomes if o.streamed]
    print(f"\n{report.name}: {len(outcomes)} turns ({len(streamed)} streamed), {report.wall:.0f} s")
    print(
        f"  model requests {requests}, faults injected {faults} ({faults / requests:.1%}): "
        + ", ".join(
            f"{kind} {n}"
            for kind, n in sorted(
                collections.Counter(
                    {o: n for (_, o), n in report.served.items() if o != "ok"}
                ).items()
            )
        )
    )
    print(f"  answered {len(answered)}/{len(outcomes)} ({len(answered) / len(outcomes):.1%})")
    print(
        f"    streamed answered {sum(o in answered for o in streamed)}/{len(streamed)}, "
        f"JSON answered {sum(o in answered for o in outcomes if not o.streamed)}"
        f"/{len(outcomes) - len(streamed)}, replies cut mid-stream {sum(o.cut for o in outcomes)}"
    )
    reasons = collections.Counter(
        (o.reason or "").split(" after ")[0].split(" reached")[0] for o in failed
    )
    print(f"  failed cleanly {len(failed)}: {dict(reasons) if reasons else '-'}")
    print(
        f"  turn time p50 {ms(p50)}, p95 {ms(p95)}, max {ms(times[-1])} "
        f"(deadline {args.deadline:g} s, attempt timeout {args.timeout:g} s)"
    )
    print(f"  lost {lost}, doubled {doubled}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--stream-share", type=float, default=0.25)
    parser.add_argument("--rate", type=float, default=0.3, help="share of requests that fail")
    parser.add_argument("--concurrency", type=int, default=50, help="people talking at once")
    parser.add_argument("--timeout", type=float, default=20.0, help="CARRIER_MODEL_TIMEOUT")
    parser.add_argument("--deadline", type=float, default=45.0, help="CARRIER_TURN_DEADLINE")
    parser.add_argument("--hang", type=float, default=30.0, help="seconds a hang lasts")
    parser.add_argument("--retry-after", type=float, default=1.0, help="a 429's Retry-After")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--only", choices=["fallback", "none"], help="run one configuration")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    print(
        f"bench/faults.py: {args.turns} turns, {args.rate:.0%} faults, {args.concurrency} at "
        f"once; {platform.python_version()}, {os.cpu_count()} cores"
    )
    for fallback in (True, False):
        if args.only and args.only != ("fallback" if fallback else "none"):
            continue
        show(await run(args, fallback=fallback), args)


if __name__ == "__main__":
    asyncio.run(main())
