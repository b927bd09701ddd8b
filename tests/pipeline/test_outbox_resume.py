"""Messages a stopped process left unanswered, kept for the next holder's client to run again
(``Outbox.recover(resume=True)``): only fresh ones, and failed once their window ends if nobody
ran them. A real SQLite file; the outbox alone (the clients' side is in
``tests/clients/discord/test_outbox.py`` and ``tests/fleet/test_connection_parts.py``)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from carrier.memory.sqlite import SQLiteStore
from carrier.outbox import INTERRUPTED, Outbox
from carrier.serving import Platforms
from carrier.types import Content, Memory, MemoryStatus, utcnow

AGENT = "agent-1"


async def received(store: SQLiteStore, text: str, age_s: float, platform: str = "chat") -> str:
    at = utcnow() - timedelta(seconds=age_s)
    memory = await store.add_memory(
        Memory(
            agent_id=AGENT,
            room_id="room",
            entity_id="ana",
            content=Content(text=text, source=platform),
            status=MemoryStatus.RECEIVED,
            created_at=at,
            updated_at=at,
        )
    )
    return memory.id


async def state(store: SQLiteStore, memory_id: str) -> tuple[MemoryStatus, str | None]:
    memory = await store.get_memory(memory_id)
    assert memory is not None
    return memory.status, memory.error


async def test_fresh_unanswered_messages_are_kept_for_the_client_and_failed_if_never_run(
    tmp_path: Path,
) -> None:
    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        fresh = await received(store, "just now", 5)
        old = await received(store, "long ago", 3600)
        other = await received(store, "on the api", 5, platform="api")
        outbox = Outbox(store, agent_id=AGENT, since=utcnow(), window_s=120)
        try:
            report = await outbox.recover(platforms=Platforms.of("chat"), resume=True)
            assert [m.id for m in report.resumable] == [fresh]
            assert (report.found, report.interrupted) == (2, 1)
            assert await state(store, fresh) == (MemoryStatus.RECEIVED, None)
            assert await state(store, old) == (MemoryStatus.FAILED, INTERRUPTED)
            assert (await state(store, other))[0] is MemoryStatus.RECEIVED  # not this platform's
        finally:
            await outbox.aclose()

        # Nobody ran it; once its window is over it is failed, saying so (a shorter window here
        # stands for the time passing).
        later = Outbox(store, agent_id=AGENT, since=utcnow(), window_s=1)
        await later.expire(platforms=Platforms.of("chat"))
        status, error = await state(store, fresh)
        assert status is MemoryStatus.FAILED and error is not None
        assert error.startswith(INTERRUPTED) and "not run again within 1 s" in error
        assert (await state(store, other))[0] is MemoryStatus.RECEIVED


async def test_without_resume_an_unanswered_message_is_failed_at_once(tmp_path: Path) -> None:
    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        fresh = await received(store, "just now", 5)
        outbox = Outbox(store, agent_id=AGENT, since=utcnow(), window_s=120)
        report = await outbox.recover(platforms=Platforms.of("chat"))
        assert report.resumable == [] and report.interrupted == 1
        assert await state(store, fresh) == (MemoryStatus.FAILED, INTERRUPTED)
        await outbox.aclose()
