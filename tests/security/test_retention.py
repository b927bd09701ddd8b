"""Retention: the daily job deletes exactly what an agent's ``settings.retention`` says (old
messages, summarized first when asked; old uploads, but those a waiting post needs) and nothing
else, and says so in the audit log; ``carrier memory prune`` does it by hand, and its dry run
only counts.

The job runs for real: the schedule ``carrier run`` stores, a JobService on SQLite driven by a
manual clock (scheduler ticks and worker drains by hand), a SQLite store, the audit log of each
backend, and a function model writing the summaries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from carrier.agents import AgentManager
from carrier.audit import AuditFilter, AuditKind, AuditLog, SQLiteAuditLog
from carrier.audit.context import cli_actor
from carrier.character import parse_character
from carrier.jobs import JobService, JobState, ManualClock, SQLiteJobStore
from carrier.llm.base import ModelRequest
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.retention.job import JOB_KIND, SCHEDULE, schedule_retention
from carrier.settings import Settings, load_settings
from carrier.types import (
    AgentRecord,
    Attachment,
    Content,
    Memory,
    MemoryKind,
    MemoryStatus,
    utcnow,
)
from tests.api.conftest import REPO

T0 = (utcnow() - timedelta(days=2)).replace(hour=12, minute=0, second=0, microsecond=0)
"""When the test starts (the manual clock's start): noon two days ago, so the schedule's daily
slot (03:30 UTC plus up to its jitter) falls inside the day the test moves the clock on,
whatever the time of day the suite runs at; and every time is in the past (the audit log
keeps entries younger than a day by the real clock)."""
RUN = T0 + timedelta(days=1)
"""When the job runs: the scheduler is ticked, the clock moved a day on, the worker drained (the
schedule's first daily slot has come by then). Ages below are as of then."""
SUMMARY = "They talked about the harbour and the ferry times."


def summarize(request: ModelRequest) -> str:
    """The model: a summary of what it is given, unless a room asks it to fail."""
    if request.purpose != "summary":
        return "<response><actions>NONE</actions><text></text></response>"
    prompt = " ".join(str(m.content) for m in request.messages)
    return "" if "unsummarizable" in prompt else SUMMARY


@dataclass
class World:
    store: SQLiteStore
    manager: AgentManager
    service: JobService
    clock: ManualClock
    audit: AuditLog
    settings: Settings

    async def agent(self, name: str, retention: dict[str, Any] | None) -> str:
        data: dict[str, Any] = {"name": name, "bio": [f"{name} keeps a harbour log."]}
        if retention is not None:
            data["settings"] = {"retention": retention}
        record = await self.manager.create(parse_character(data))
        return record.id

    async def say(
        self,
        agent_id: str,
        text: str,
        *,
        age: float,
        room: str = "room-1",
        kind: MemoryKind = MemoryKind.MESSAGE,
        **fields: Any,
    ) -> Memory:
        at = RUN - timedelta(days=age)
        return await self.store.add_memory(
            Memory(
                agent_id=agent_id,
                room_id=room,
                entity_id="person-1",
                kind=kind,
                content=fields.pop("content", None) or Content(text=text),
                created_at=at,
                updated_at=at,
                **fields,
            )
        )

    def upload(self, agent_id: str, folder: str, name: str, *, age: float) -> Path:
        path = self.settings.data_dir / folder / agent_id / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\x89PNG not really")
        stamp = (RUN - timedelta(days=age)).timestamp()
        os.utime(path, (stamp, stamp))
        return path

    async def texts(self, agent_id: str, kind: MemoryKind | None = None) -> list[str]:
        found = await self.store.get_memories(
            agent_id=agent_id, kinds=[kind] if kind else None, limit=1000
        )
        return sorted(m.content.text for m in found)

    async def run_daily_job(self) -> None:
        """What ``carrier run`` does: the schedule stored, then a day of scheduler and worker."""
        await self.service.scheduler.tick()
        self.clock.advance(days=1)
        await self.service.scheduler.tick()
        await self.service.worker.drain()
        assert self.clock() == RUN
        [job] = await self.service.store.list_jobs(kind=JOB_KIND, states=[JobState.SUCCEEDED])
        assert job.result is not None


@pytest.fixture
async def world(tmp_path: Path, audit: AuditLog) -> AsyncIterator[World]:
    settings = load_settings({"CARRIER_DATA_DIR": str(tmp_path / "data")})
    clock = ManualClock(T0)
    model = FunctionModel(summarize)
    async with (
        SQLiteStore(path=tmp_path / "store.db") as store,
        SQLiteJobStore(path=tmp_path / "jobs.db", clock=clock) as jobs,
    ):
        manager = AgentManager(
            store=store,
            embedder=HashEmbedder(),
            settings=settings,
            environ={},
            model_factory=lambda character: model,
            services={"audit": audit},
        )
        service = JobService(store=jobs, owns_store=False)
        await schedule_retention(service, manager, audit_days=365)
        yield World(store, manager, service, clock, audit, settings)
        await manager.close()


async def test_retention_deletes_exactly_what_the_policy_says(world: World) -> None:
    w = world
    kept = await w.agent("Keeper", {"messages": 30, "uploads": 7})
    other = await w.agent("Hoarder", None)  # no policy: nothing of it goes
    for age, text in ((45, "old a"), (31, "old b"), (29.9, "recent c"), (2, "recent d")):
        await w.say(kept, text, age=age)
        await w.say(other, f"theirs {text}", age=age)
    await w.say(kept, "old in room 2", age=60, room="room-2")
    for kind in (MemoryKind.FACT, MemoryKind.SUMMARY, MemoryKind.KNOWLEDGE, MemoryKind.REFLECTION):
        await w.say(kept, f"old {kind}", age=90, kind=kind)
    old_upload = w.upload(kept, "uploads", "old.png", age=8)
    new_upload = w.upload(kept, "uploads", "new.png", age=6)
    posted = w.upload(kept, "media", "posted.jpg", age=20)
    waiting = w.upload(kept, "media", "waiting.jpg", age=20)  # its post is still due
    await w.say(
        kept,
        "to post",
        age=20,
        kind=MemoryKind.POST,
        status=MemoryStatus.RECEIVED,
        content=Content(text="to post", attachments=[Attachment(path=str(waiting))]),
    )
    theirs = w.upload(other, "uploads", "theirs.png", age=90)
    await w.audit.record(AuditKind.API_CALL, actor="admin", at=RUN - timedelta(days=366))
    await w.audit.record(AuditKind.API_CALL, actor="admin", at=RUN - timedelta(days=364))

    await w.run_daily_job()

    assert await w.texts(kept, MemoryKind.MESSAGE) == ["recent c", "recent d"]
    others = ["to post", "old fact", "old summary", "old knowledge", "old reflection"]
    assert await w.texts(kept) == sorted(["recent c", "recent d", *others])
    assert len(await w.texts(other)) == 4
    assert not old_upload.exists() and not posted.exists()
    assert new_upload.exists() and waiting.exists() and theirs.exists()

    pruned = (await w.audit.list_events(AuditFilter(kinds=("memory.prune",)))).items
    [run] = [e for e in pruned if e.agent_id == kept]
    assert run.actor == "system" and run.action == "retention"
    assert run.detail["messages"] == 3 and run.detail["uploads"] == 2
    assert run.detail["policy"] == {"messages": 30, "uploads": 7, "summarizeBeforeDelete": False}
    [expiry] = [e for e in pruned if e.agent_id is None]
    assert expiry.detail == {"audit_entries": 1, "keep_days": 365}
    calls = (await w.audit.list_events(AuditFilter(kinds=("api.call",)))).items
    assert [e.at for e in calls] == [RUN - timedelta(days=364)]


async def test_retention_summarizes_before_deleting_and_keeps_what_it_could_not(
    world: World,
) -> None:
    w = world
    agent = await w.agent("Scribe", {"messages": 10, "summarizeBeforeDelete": True})
    old = [await w.say(agent, f"ferry talk {i}", age=20 + i) for i in range(3)]
    await w.say(agent, "yesterday", age=1)
    stuck = await w.say(agent, "unsummarizable words", age=30, room="room-2")

    await w.run_daily_job()

    [summary] = await w.store.get_memories(agent_id=agent, kinds=[MemoryKind.SUMMARY])
    assert summary.content.text == SUMMARY and summary.room_id == "room-1"
    assert sorted(summary.content.metadata["covers"]) == sorted(m.id for m in old)
    assert summary.created_at == max(m.created_at for m in old)  # dated at what it covers
    assert await w.texts(agent, MemoryKind.MESSAGE) == ["unsummarizable words", "yesterday"]
    assert await w.store.get_memory(stuck.id) is not None  # no summary, so not deleted
    [run] = (await w.audit.list_events(AuditFilter(agent_id=agent, kinds=("memory.prune",)))).items
    assert run.detail["summaries"] == 1 and run.detail["messages"] == 3
    assert run.detail["rooms_kept_unsummarized"] == 1


def test_retention_schedule_is_daily() -> None:
    assert SCHEDULE.kind == JOB_KIND and SCHEDULE.spec.type == "cron"
    first = SCHEDULE.spec.first(datetime(2025, 6, 1, 12, tzinfo=T0.tzinfo), _rng())
    following = SCHEDULE.spec.following(first, first, _rng())
    assert following is not None and timedelta(hours=23) < following - first < timedelta(hours=25)


def _rng() -> Any:
    import random

    return random.Random(1)


# -- carrier memory prune ------------------------------------------------------------------------


def carrier_cli(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARRIER_")}
    env.update({"CARRIER_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"})
    return subprocess.run(
        [sys.executable, "-m", "carrier", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=240,
    )


async def test_memory_prune_dry_run_counts_and_the_real_run_deletes_and_is_audited(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    path = data_dir / "carrier.db"

    async def seed() -> None:
        async with SQLiteStore(path=path) as store:
            await store.upsert_agent(AgentRecord(id="agent-p", name="Pruned", character={}))
            for days, kind in (
                (40, MemoryKind.MESSAGE),
                (35, MemoryKind.MESSAGE),
                (5, MemoryKind.MESSAGE),
                (40, MemoryKind.FACT),
            ):
                at = T0 - timedelta(days=days)
                await store.add_memory(
                    Memory(
                        agent_id="agent-p",
                        room_id="r",
                        entity_id="e",
                        kind=kind,
                        content=Content(text=f"{kind} {days}"),
                        created_at=at,
                        updated_at=at,
                    )
                )

    await seed()

    async def left() -> list[str]:
        async with SQLiteStore(path=path) as store:
            return sorted(m.content.text for m in await store.get_memories(agent_id="agent-p"))

    dry = carrier_cli(
        "memory", "prune", "--older-than", "30d", "-a", "Pruned", "--dry-run", data_dir=data_dir
    )
    assert dry.returncode == 0, dry.stderr
    assert "would delete 2 message memories of Pruned older than 30d" in dry.stdout
    assert len(await left()) == 4

    real = carrier_cli("memory", "prune", "--older-than", "30d", "-a", "agent-p", data_dir=data_dir)
    assert real.returncode == 0, real.stderr
    assert "deleted 2 message memories" in real.stdout
    assert await left() == ["fact 40", "message 5"]
    facts = carrier_cli(
        "memory",
        "prune",
        "--older-than",
        "4w",
        "--kind",
        "fact",
        "-a",
        "agent-p",
        data_dir=data_dir,
    )
    assert facts.returncode == 0 and "deleted 1 fact memories" in facts.stdout
    refused = carrier_cli(
        "memory", "prune", "--older-than", "1d", "--kind", "knowledge", "-a", "agent-p",
        data_dir=data_dir,
    )  # fmt: skip
    assert refused.returncode == 2 and "carrier knowledge remove" in refused.stderr
    bad = carrier_cli("memory", "prune", "--older-than", "soon", "-a", "agent-p", data_dir=data_dir)
    assert bad.returncode == 2 and "not an age" in bad.stderr

    async with SQLiteAuditLog(path=path) as audit:
        runs = (await audit.list_events(AuditFilter(kinds=("memory.prune",)))).items
    assert [(e.actor, e.agent_id, e.detail["deleted"], e.detail["kinds"]) for e in runs] == [
        (cli_actor(), "agent-p", 1, ["fact"]),
        (cli_actor(), "agent-p", 2, ["message"]),
    ]
    listed = carrier_cli("audit", "--json", "--kind", "memory.prune", data_dir=data_dir)
    assert [json.loads(line)["detail"]["older_than"] for line in listed.stdout.splitlines()] == [
        "4w",
        "30d",
    ]
