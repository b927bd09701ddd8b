"""The audit log: every audited action leaves an entry naming who did it; entries are filtered and
paged newest first; nothing in them is a secret; nothing in them is changed or deleted but by age.

The log's own tests run on SQLite and on the loopback MongoDB-compatible server; the call sites
(the API, agent starts and stops, forgets, the commands) are driven for real: the app through
httpx, ``carrier`` as a subprocess."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from carrier.audit import AuditEvent, AuditFilter, AuditKind, AuditLog, NullAuditLog
from carrier.audit.base import MIN_KEEP
from carrier.errors import StoreError
from carrier.types import utcnow
from tests.security.audit_support import AuditFactory, dump

NOW = utcnow().replace(microsecond=0)
OPENAI = "sk-proj-" + "Zq4" * 14
GITHUB = "ghp_" + "a1B2c3D4e5" * 4
PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    + "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" * 4
    + "\n-----END PRIVATE KEY-----"
)


def ago(**delta: float) -> datetime:
    return NOW - timedelta(**delta)


# -- the log itself, on every backend ------------------------------------------------------------


async def test_audit_filters_and_pages_newest_first(audit: AuditLog) -> None:
    made = []
    for i in range(7):
        made.append(
            await audit.append(
                AuditEvent(
                    at=ago(hours=7 - i),
                    kind=[AuditKind.API_CALL, AuditKind.AGENT_START, AuditKind.MEMORY_FORGET][
                        i % 3
                    ],
                    actor="admin" if i % 2 else "ops-token",
                    agent_id="agent-a" if i < 4 else "agent-b",
                    action=f"step {i}",
                )
            )
        )
    same_instant = await audit.append(
        AuditEvent(at=made[-1].at, kind="api.call", actor="admin", agent_id="agent-b")
    )

    everything = await audit.list_events()
    assert {e.id for e in everything.items} == {e.id for e in [*made, same_instant]}
    assert [e.at for e in everything.items] == sorted(
        (e.at for e in everything.items), reverse=True
    )
    assert everything.next_cursor is None

    # Paging: two at a time, with the same filter, meets every event once, in order.
    seen: list[AuditEvent] = []
    cursor = None
    while True:
        page = await audit.list_events(limit=2, cursor=cursor)
        seen += page.items
        cursor = page.next_cursor
        if cursor is None:
            break
    assert [e.id for e in seen] == [e.id for e in everything.items]

    def ids(events: list[AuditEvent]) -> set[str]:
        return {e.id for e in events}

    by_agent = await audit.list_events(AuditFilter(agent_id="agent-a"))
    assert ids(by_agent.items) == ids(made[:4])
    assert ids((await audit.list_events(AuditFilter(agent_id="agent-b"))).items) == ids(
        [*made[4:], same_instant]
    )
    by_actor = await audit.list_events(AuditFilter(actor="ops-token"))
    assert ids(by_actor.items) == ids(made[0::2])
    kinds = await audit.list_events(AuditFilter(kinds=("agent.start", "memory.forget")))
    assert ids(kinds.items) == ids([e for i, e in enumerate(made) if i % 3])
    window = await audit.list_events(AuditFilter(since=made[2].at, until=made[5].at))
    assert ids(window.items) == ids(made[2:5])  # since inclusive, until exclusive
    both = await audit.list_events(
        AuditFilter(agent_id="agent-b", actor="admin", kinds=("api.call",), since=made[4].at)
    )
    assert ids(both.items) == {same_instant.id}
    with pytest.raises(ValueError, match="not an audit cursor"):
        await audit.list_events(cursor="not-a-cursor")


async def test_audit_is_append_only_and_expires_by_age_only(
    audit: AuditLog, audit_factory: AuditFactory
) -> None:
    assert not [
        name
        for name in dir(audit)
        if name.startswith(("update", "delete", "remove", "edit", "replace"))
    ]
    old = await audit.append(AuditEvent(at=ago(days=400), kind="api.call"))
    month = await audit.append(AuditEvent(at=ago(days=30), kind="api.call"))
    fresh = await audit.append(AuditEvent(at=ago(hours=2), kind="api.call"))

    assert await audit.expire(ago(days=365)) == 1
    # Asked to delete everything, it still keeps what is younger than a day.
    assert await audit.expire(NOW + timedelta(days=1)) == 1
    left = await audit.list_events()
    assert [e.id for e in left.items] == [fresh.id]
    assert {old.id, month.id}.isdisjoint(e.id for e in left.items)
    assert timedelta(days=1) == MIN_KEEP

    # The same entry twice is refused (ids are unique), and record() never raises for it.
    with pytest.raises(StoreError):
        await audit.append(fresh)
    failures = audit.failures
    assert await audit.record("not a kind") is None
    assert audit.failures == failures + 1


async def test_audit_sqlite_table_refuses_updates_and_recent_deletes(tmp_path: Path) -> None:
    from carrier.audit import SQLiteAuditLog

    path = tmp_path / "carrier.db"
    async with SQLiteAuditLog(path=path) as log:
        await log.record(AuditKind.AGENT_STOP, actor="admin", agent_id="a")
        await log.append(AuditEvent(at=ago(days=3), kind="api.call"))
    with closing(sqlite3.connect(path)) as db:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            db.execute("UPDATE audit_events SET actor = 'someone else'")
        with pytest.raises(sqlite3.DatabaseError, match="younger than a day"):
            db.execute("DELETE FROM audit_events")
        db.execute(
            "DELETE FROM audit_events WHERE at_us < ?", (int(ago(days=2).timestamp() * 1e6),)
        )
        db.commit()
        assert [row[0] for row in db.execute("SELECT kind FROM audit_events")] == ["agent.stop"]


async def test_audit_never_stores_a_secret(audit: AuditLog, audit_factory: AuditFactory) -> None:
    await audit.record(
        AuditKind.API_CALL,
        actor=f"token {GITHUB}",
        agent_id="agent-a",
        action=f"POST /tools?key={OPENAI}",
        target="https://user:hunter2hunter2@db.example/carrier",
        detail={
            "error": f"401 from the service: bad key {OPENAI}",
            "nested": {"list": ["fine", {"pem": PEM}], "url": "mongodb://u:s3cretpass@h/db"},
            OPENAI: "a secret as a key",
            "long": "x" * 10_000 + OPENAI,
        },
    )
    stored = dump(audit_factory.raw())
    for secret in (
        OPENAI,
        GITHUB,
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
        "hunter2hunter2",
        "s3cretpass",
    ):
        assert secret not in stored
    [event] = (await audit.list_events()).items
    assert "401 from the service: bad key" in event.detail["error"]
    assert len(event.detail["long"]) <= 500


async def test_audit_null_log_records_nothing() -> None:
    null = NullAuditLog()
    assert await null.record(AuditKind.AGENT_START, agent_id="a") is not None
    assert (await null.list_events()).items == []
