"""A sharded bot split across workers, with real processes: one ``carrier serve --no-clients``
(the web) and two ``carrier run --no-api`` (the workers) on one SQLite store, and a fake Discord
that recommends two shards and routes each guild's events to its shard.

- The agent's ``clientConfig.discord.shards: 2`` makes two connection parts, each leased on its
  own: each worker identifies one shard, and never are two sessions of one shard open at once.
- A message in a guild of each shard is answered once, by the worker holding that shard.
- The holder of shard 1 is killed with SIGKILL: the other worker takes that shard over (it
  identifies it) and answers there, while its own shard stays as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from clients.discord.fake import FakeDiscord
from clients.discord.fake.server import Guild
from clients.discord.shards import shard_of
from tests.deploy.test_workers import Fleet, until

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]

SHARDS = 2
PILOT: dict[str, Any] = {
    "name": "Pilot",
    "bio": ["Pilot guides ships into the harbour."],
    "clients": ["discord"],
    "clientConfig": {"discord": {"rateLimit": False, "shards": SHARDS}},
}


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(shards=SHARDS) as fake:
        yield fake


@dataclass
class ShardWatch:
    """Samples the fake's ready sessions by shard every few milliseconds."""

    fake: FakeDiscord
    most: Counter[int] = field(default_factory=Counter)

    async def run(self) -> None:
        while True:
            ready = Counter(s.shard[0] for s in self.fake.gateway.sessions if s.ready)
            for shard, n in ready.items():
                self.most[shard] = max(self.most[shard], n)
            await asyncio.sleep(0.005)

    def identifies(self) -> Counter[int]:
        return Counter(int((d.get("shard") or [0, 1])[0]) for d in self.fake.gateway.identifies)


async def guild_per_shard(fake: FakeDiscord) -> dict[int, Guild]:
    """A guild on each shard (a guild's shard follows its id, a timestamp: made until both)."""
    found: dict[int, Guild] = {}
    for i in range(200):
        guild = fake.add_guild(f"Harbour {i}", ["deck"])
        found.setdefault(shard_of(guild.id, SHARDS), guild)
        if len(found) == SHARDS:
            return found
        await asyncio.sleep(0.002)
    raise AssertionError("the fake never made a guild on every shard")


def answered(fake: FakeDiscord) -> Counter[int]:
    return Counter(
        int(sent.payload["message_reference"]["message_id"])
        for sent in fake.sent
        if sent.payload.get("message_reference")
    )


async def test_two_workers_split_a_sharded_bot_and_take_a_dead_ones_shard_over(
    tmp_path: Path, discord: FakeDiscord
) -> None:
    from tests.deploy.procs import base_env

    characters = tmp_path / "characters"
    characters.mkdir()

    def env(**extra: str) -> dict[str, str]:
        return base_env(tmp_path / "data", CARRIER_CHARACTERS_DIR=str(characters), **extra)

    guilds = await guild_per_shard(discord)
    people = {
        shard: discord.add_member(guild, f"person-{shard}") for shard, guild in guilds.items()
    }
    watch = ShardWatch(discord)
    watcher = asyncio.create_task(watch.run())
    fleet = Fleet(env, discord)
    procs = await fleet.start("worker-a", "worker-b")
    try:
        await fleet.start_agent(PILOT)
        await until(
            lambda: (
                sorted(s.shard for s in discord.gateway.sessions if s.ready)
                == [(0, SHARDS), (1, SHARDS)]
            ),
            "each shard connects",
            *procs,
        )
        leases = {
            lease.name.rsplit("#", 1)[1]: lease.owner
            for lease in await fleet.fleet.leases("conn:discord:")
        }
        assert sorted(leases) == ["0/2", "1/2"], leases
        assert sorted(leases.values()) == ["worker-a", "worker-b"], "one shard on each worker"

        async def ask(shard: int, text: str) -> int:
            guild = guilds[shard]
            posted = await discord.post(people[shard], f"<@{discord.bot_id}> {text}",
                                        channel=guild.channels["deck"])  # fmt: skip
            message_id = int(posted["id"])
            await until(lambda: answered(discord)[message_id] == 1, f"{text} answered", *procs)
            return message_id

        for shard in range(SHARDS):
            await ask(shard, f"hello from shard {shard}")

        # The holder of shard 1 dies; the other takes that shard over and answers there.
        victim, survivor = leases["1/2"], leases["0/2"]
        fleet.procs[victim].kill()
        killed_at = time.monotonic()
        await until(lambda: watch.identifies()[1] == 2, "shard 1 taken over", *procs)
        took_over_s = time.monotonic() - killed_at
        owners = {
            lease.name.rsplit("#", 1)[1]: lease.owner
            for lease in await fleet.fleet.leases("conn:discord:")
            if lease.expires_at > fleet.fleet.now()
        }
        assert owners == {"0/2": survivor, "1/2": survivor}, owners
        await ask(1, "still there on shard 1?")
        await ask(0, "and on shard 0?")

        assert watch.identifies()[0] == 1, "shard 0 stayed connected where it was"
        assert max(answered(discord).values()) == 1
        assert watch.most == {0: 1, 1: 1}, f"two sessions of one shard at once: {watch.most}"
        print(f"\nshard 1 taken over {took_over_s:.1f} s after kill -9")
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        await fleet.close()
