"""Discord client under a burst: messages/s and time-to-reply through the real client adapter.

discord.py runs unchanged against the loopback fake Discord (real HTTP, real gateway websocket);
the runtime is the real pipeline with a real SQLite file, a hashing embedder (``--real-embedder``
for all-MiniLM-L6-v2) and a fake model that answers instantly (or after ``--model-latency`` s).
The per-user rate limit is off: every message mentions the bot, from 200 different people.

Three scenarios:
  burst         N messages sent at once, round-robin over C channels. One turn runs per channel at a
                time and a message still waiting when a newer one arrives in its channel is superseded
                (the runtime answers the latest), so only some are answered.
  conversation  C channels talking at once, each sending its next message when the previous answer
                arrives (nothing is superseded): every message is answered.
  direct        the conversation scenario without Discord (straight into ``runtime.handle``): the
                baseline, so the difference is what the client adapter costs.

    .venv/bin/python bench/discord_burst.py --messages 1000 --channels 50
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)

from carrier.character import Character  # noqa: E402
from carrier.llm.base import ModelRequest  # noqa: E402
from carrier.llm.fake import FunctionModel  # noqa: E402
from carrier.memory.fake import HashEmbedder  # noqa: E402
from carrier.memory.sqlite import SQLiteStore  # noqa: E402
from carrier.runtime import AgentRuntime  # noqa: E402
from carrier.types import Author, Channel, MemoryKind, MemoryStatus, Message, RoomKind  # noqa: E402
from clients.discord import create_client  # noqa: E402
from clients.discord.client import DiscordClient  # noqa: E402
from clients.discord.fake import FakeDiscord  # noqa: E402

CHARACTER = {"name": "Harbor", "username": "harbor", "bio": ["Harbor hosts a game-dev server."]}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def settle(fake: FakeDiscord, client: DiscordClient) -> None:
    def done() -> bool:
        return client.stats.events >= fake.dispatched["MESSAGE_CREATE"] and not client.busy

    await fake.wait_until(done, within=600)


async def run(args: argparse.Namespace, scenario: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeDiscord() as fake, SQLiteStore(path=Path(tmp) / "bench.db") as store:
            guild = fake.add_guild("Bench", [f"channel-{i}" for i in range(args.channels)])
            people = [fake.add_member(guild, f"user{i}") for i in range(200)]
            channels = list(guild.channels.values())

            async def answer(request: ModelRequest) -> str:
                if args.model_latency:
                    await asyncio.sleep(args.model_latency)
                return (
                    f"<response><actions>REPLY</actions><text>re: {request.query}</text></response>"
                )

            if args.real_embedder:
                from carrier.memory.sentence import SentenceTransformerEmbedder

                embedder: Any = SentenceTransformerEmbedder()
            else:
                embedder = HashEmbedder()
            runtime = AgentRuntime(
                character=Character.model_validate(CHARACTER),
                store=store,
                embedder=embedder,
                model=FunctionModel(answer),
                fact_interval=10**9,
            )
            await runtime.start()
            client = create_client(
                runtime,
                {"rateLimit": False},
                {"DISCORD_API_TOKEN": fake.token},
                discord_options={"guild_ready_timeout": 0.05},
            )
            await client.start()
            bot = fake.bot
            mention = f"<@{fake.bot_id}>"
            posted: dict[str, float] = {}
            start = time.perf_counter()
            if scenario == "burst":
                for i in range(args.messages):
                    data = await fake.post(
                        people[i % len(people)],
                        f"{mention} question {i}",
                        channel=channels[i % len(channels)],
                        mentions=[bot],
                    )
                    posted[data["id"]] = time.perf_counter()
            else:
                per_channel = args.messages // len(channels)

                async def talk(c: int) -> None:
                    for j in range(per_channel):
                        data = await fake.post(
                            people[(c * per_channel + j) % len(people)],
                            f"{mention} question {c}-{j}",
                            channel=channels[c],
                            mentions=[bot],
                        )
                        posted[data["id"]] = time.perf_counter()
                        await fake.wait_sent(channels[c], j + 1, within=600)

                await asyncio.gather(*(talk(c) for c in range(len(channels))))
            await settle(fake, client)
            elapsed = time.perf_counter() - start
            latencies = [
                (s.at - posted[str(s.payload["message_reference"]["message_id"])]) * 1000
                for s in fake.sent
                if "message_reference" in s.payload
            ]
            inbound = await store.get_memories(
                agent_id=runtime.agent_id,
                kinds=[MemoryKind.MESSAGE],
                statuses=[MemoryStatus.SUPERSEDED],
                limit=10**6,
            )
            await client.stop()
            await runtime.stop()
            return {
                "scenario": scenario,
                "messages": len(posted),
                "elapsed": elapsed,
                "answered": len(latencies),
                "superseded": len(inbound),
                "errors": client.stats.errors,
                "p50": statistics.median(latencies) if latencies else float("nan"),
                "p95": pct(latencies, 95) if latencies else float("nan"),
            }


async def direct(args: argparse.Namespace) -> dict[str, Any]:
    """The conversation scenario with no Discord in the way."""
    with tempfile.TemporaryDirectory() as tmp:
        async with SQLiteStore(path=Path(tmp) / "bench.db") as store:
            runtime = AgentRuntime(
                character=Character.model_validate(CHARACTER),
                store=store,
                embedder=HashEmbedder(),
                model=FunctionModel(
                    lambda r: (
                        f"<response><actions>REPLY</actions><text>re: {r.query}</text></response>"
                    )
                ),
                fact_interval=10**9,
            )
            await runtime.start()
            latencies: list[float] = []
            per_channel = args.messages // args.channels

            async def talk(c: int) -> None:
                for j in range(per_channel):
                    user = str((c * per_channel + j) % 200)
                    message = Message(
                        platform="discord",
                        author=Author(platform_id=user, name=f"user{user}"),
                        channel=Channel(
                            platform_id=str(c), name=f"channel-{c}", kind=RoomKind.GROUP
                        ),
                        text=f"question {c}-{j}",
                        platform_message_id=f"{c}-{j}",
                        mentions_agent=True,
                    )
                    began = time.perf_counter()
                    await runtime.handle(message)
                    latencies.append((time.perf_counter() - began) * 1000)

            start = time.perf_counter()
            await asyncio.gather(*(talk(c) for c in range(args.channels)))
            elapsed = time.perf_counter() - start
            await runtime.stop()
            return {
                "scenario": "direct",
                "messages": len(latencies),
                "elapsed": elapsed,
                "answered": len(latencies),
                "superseded": 0,
                "errors": 0,
                "p50": statistics.median(latencies),
                "p95": pct(latencies, 95),
            }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--channels", type=int, default=50)
    parser.add_argument(
        "--model-latency", type=float, default=0.0, help="seconds the fake model takes"
    )
    parser.add_argument("--real-embedder", action="store_true")
    parser.add_argument(
        "--scenario", choices=["burst", "conversation", "direct", "all"], default="all"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    scenarios = ["burst", "conversation", "direct"] if args.scenario == "all" else [args.scenario]
    print(
        f"{args.messages} messages over {args.channels} channels; fake model "
        f"({args.model_latency * 1000:.0f} ms); {'MiniLM' if args.real_embedder else 'hashing'} embedder; "
        f"SQLite; discord.py over loopback"
    )
    for scenario in scenarios:
        r = asyncio.run(direct(args) if scenario == "direct" else run(args, scenario))
        print(
            f"{r['scenario']:>12}: {r['messages'] / r['elapsed']:7.1f} messages/s handled "
            f"({r['messages']} in {r['elapsed']:.2f} s) | answered {r['answered']}, superseded {r['superseded']}, "
            f"errors {r['errors']} | time to reply p50 {r['p50']:.0f} ms, p95 {r['p95']:.0f} ms"
        )


if __name__ == "__main__":
    main()
