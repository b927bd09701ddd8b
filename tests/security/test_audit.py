"""The audit log: every audited action leaves an entry naming who did it; entries are filtered and
paged newest first; nothing in them is a secret; nothing in them is changed or deleted but by age.

The log's own tests run on SQLite and on the loopback MongoDB-compatible server; the call sites
(the API, agent starts and stops, forgets, the commands) are driven for real: the app through
httpx, ``carrier`` as a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from carrier.agents import AgentManager
from carrier.api import ApiSettings, create_app
from carrier.audit import AuditEvent, AuditFilter, AuditKind, AuditLog, NullAuditLog, SQLiteAuditLog
from carrier.audit.base import MIN_KEEP
from carrier.audit.context import cli_actor
from carrier.audit.redactions import RedactionRecorder
from carrier.errors import StoreError
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.memory.rights import entity_id_for
from carrier.memory.sqlite import SQLiteStore
from carrier.safety.redact import Redactor, using_redactor
from carrier.settings import Settings
from carrier.types import utcnow
from tests.api.conftest import ADMIN, CHARACTER, REPO
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


# -- the API: every state-changing call, with the token's name ---------------------------------


@pytest.fixture
async def audited(
    make_manager: Callable[..., AgentManager],
    settings: Settings,
    api_settings: ApiSettings,
    make_client: Callable[..., httpx.AsyncClient],
    audit: AuditLog,
) -> AsyncIterator[tuple[httpx.AsyncClient, Callable[..., httpx.AsyncClient]]]:
    """The API of a manager whose host keeps ``audit``; yields an admin client and a maker of
    clients with other tokens (``token=None``: none)."""
    manager = make_manager(settings, services={"audit": audit})
    app = create_app(manager, settings, api_settings=api_settings)
    async with make_client(app) as admin:
        yield admin, lambda **kw: make_client(app, **kw)
    await manager.close()


def calls(events: list[AuditEvent]) -> list[tuple[str | None, str, int]]:
    """``(actor, action, status)`` of the ``api.call`` events, oldest first."""
    return [
        (e.actor, e.action, e.detail["status"])
        for e in reversed(events)
        if e.kind == AuditKind.API_CALL
    ]


async def test_audit_api_calls_name_the_token_and_refusals_are_kept(
    audited: tuple[httpx.AsyncClient, Callable[..., httpx.AsyncClient]],
    audit: AuditLog,
    audit_factory: AuditFactory,
) -> None:
    admin, client_with = audited
    agent_id = (await admin.post("/agents", json=CHARACTER)).json()["id"]
    assert (await admin.post(f"/agents/{agent_id}/start")).status_code == 200
    made = await admin.post("/tokens", json={"name": "pilot-bot", "agent_id": agent_id})
    assert made.status_code == 201
    token = made.json()["token"]
    assert (await admin.get("/agents")).status_code == 200  # reads are not audited

    async with client_with(token=token) as bot:
        sent = await bot.post(f"/{agent_id}/message", json={"text": "hello", "user_id": "ana"})
        assert sent.status_code == 200, sent.text
        refused = await bot.post(f"/agents/{agent_id}/stop")
        assert refused.status_code == 403
    async with client_with(token=None) as nobody:
        assert (await nobody.post(f"/agents/{agent_id}/stop")).status_code == 401
    async with client_with(token="crr_not-a-token") as wrong:
        assert (await wrong.delete(f"/agents/{agent_id}")).status_code == 401
    assert (await admin.post(f"/agents/{agent_id}/stop")).status_code == 200

    events = (await audit.list_events()).items
    route = "/agents/{agent_id}"
    assert calls(events) == [
        ("admin", "POST /agents", 201),
        ("admin", f"POST {route}/start", 200),
        ("admin", "POST /tokens", 201),
        ("token:pilot-bot", "POST /{agent_id}/message", 200),
        ("token:pilot-bot", f"POST {route}/stop", 403),
        ("anonymous", f"POST {route}/stop", 401),
        ("anonymous", f"DELETE {route}", 401),
        ("admin", f"POST {route}/stop", 200),
    ]
    refusal = next(e for e in events if e.detail.get("status") == 403)
    assert refusal.result == "refused" and refusal.agent_id == agent_id
    assert (
        refusal.target == f"/agents/{agent_id}/stop" and refusal.detail["client"] == "198.51.100.7"
    )
    [start] = [e for e in events if e.kind == AuditKind.AGENT_START]
    [stop] = [e for e in events if e.kind == AuditKind.AGENT_STOP]
    assert (start.actor, start.agent_id, start.detail["model"]) == ("admin", agent_id, "function")
    assert (stop.actor, stop.agent_id) == ("admin", agent_id)
    # Neither token, nor any body, is stored.
    stored = dump(audit_factory.raw())
    assert token not in stored and ADMIN not in stored and "hello" not in stored


async def test_audit_read_over_the_api_is_admin_only_and_filtered(
    audited: tuple[httpx.AsyncClient, Callable[..., httpx.AsyncClient]], audit: AuditLog
) -> None:
    admin, client_with = audited
    for i in range(5):
        await audit.append(
            AuditEvent(
                at=ago(days=5 - i),
                kind=AuditKind.MEMORY_FORGET if i % 2 else AuditKind.AGENT_START,
                actor="ops" if i < 3 else "admin",
                agent_id="agent-a" if i % 2 else "agent-b",
            )
        )
    agent_id = (await admin.post("/agents", json=CHARACTER)).json()["id"]
    token = (await admin.post("/tokens", json={"name": "bot", "agent_id": agent_id})).json()[
        "token"
    ]
    async with client_with(token=token) as bot:
        denied = await bot.get("/audit")
        assert denied.status_code == 403 and "admin token" in denied.json()["message"]

    async def read(**params: Any) -> list[str]:
        response = await admin.get("/audit", params=params)
        assert response.status_code == 200, response.text
        return [f"{e['kind']}/{e['actor']}/{e['agent_id']}" for e in response.json()["items"]]

    assert await read(agent_id="agent-a") == [
        "memory.forget/admin/agent-a",
        "memory.forget/ops/agent-a",
    ]
    assert await read(actor="ops") == [
        "agent.start/ops/agent-b",
        "memory.forget/ops/agent-a",
        "agent.start/ops/agent-b",
    ]
    assert len(await read(kind=["memory.forget", "agent.start"])) == 5
    assert await read(kind="api.call") == ["api.call/admin/None", "api.call/admin/None"]
    since, until = ago(days=3).isoformat(), ago(days=1).isoformat()
    assert await read(since=since, until=until, kind="agent.start") == ["agent.start/ops/agent-b"]

    first = (await admin.get("/audit", params={"limit": 3})).json()
    assert len(first["items"]) == 3 and first["next_cursor"]
    rest = (await admin.get("/audit", params={"limit": 3, "cursor": first["next_cursor"]})).json()
    assert len(rest["items"]) == 3 and rest["next_cursor"] is not None
    ids = [e["id"] for e in first["items"] + rest["items"]]
    assert len(set(ids)) == 6
    bad = await admin.get("/audit", params={"cursor": "garbage"})
    assert bad.status_code == 422 and bad.json()["problems"][0]["path"] == "query.cursor"
    assert (await admin.get("/audit", params={"kind": "API CALL"})).status_code == 422


async def test_audit_route_without_an_audit_log_says_so(client: httpx.AsyncClient) -> None:
    response = await client.get("/audit")
    assert response.status_code == 409 and response.json()["error"] == "audit_unavailable"


async def test_audit_refusals_of_anonymous_callers_are_bounded(
    audited: tuple[httpx.AsyncClient, Callable[..., httpx.AsyncClient]], audit: AuditLog
) -> None:
    from carrier.api.auditing import ANONYMOUS_BURST

    _, client_with = audited
    async with client_with(token=None, host="203.0.113.9") as flood:
        for _ in range(ANONYMOUS_BURST + 10):
            assert (await flood.post("/agents", json={})).status_code == 401
    anonymous = (await audit.list_events(AuditFilter(actor="anonymous"), limit=500)).items
    assert len(anonymous) == ANONYMOUS_BURST


# -- forgets (API and command) and `carrier audit` ---------------------------------------------


def carrier_cli(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARRIER_")}
    env.update({"CARRIER_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1", "COLUMNS": "250"})
    return subprocess.run(
        [sys.executable, "-m", "carrier", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=240,
    )


async def test_audit_forgets_by_api_and_command_and_carrier_audit_lists_them(
    settings: Settings,
    api_settings: ApiSettings,
    make_client: Callable[..., httpx.AsyncClient],
    model: FunctionModel,
) -> None:
    data_dir = settings.data_dir
    async with (
        SQLiteStore(path=settings.store_path) as store,
        SQLiteAuditLog(path=settings.store_path) as audit,
    ):
        manager = AgentManager(
            store=store,
            embedder=HashEmbedder(),
            settings=settings,
            environ={},
            model_factory=lambda character: model,
            services={"audit": audit},
        )
        app = create_app(manager, settings, api_settings=api_settings)
        async with make_client(app) as admin:
            agent_id = (await admin.post("/agents", json=CHARACTER)).json()["id"]
            await admin.post(f"/agents/{agent_id}/start")
            for user, name in (("ana", "Ana"), ("bob", "Bob")):
                sent = await admin.post(
                    f"/{agent_id}/message",
                    json={"text": f"hi, I am {name}", "user_id": user, "user_name": name},
                )
                assert sent.status_code == 200, sent.text
            forgot = await admin.delete(
                f"/agents/{agent_id}/entities/ana/memories", params={"platform": "api"}
            )
            assert forgot.status_code == 200, forgot.text
        await manager.close()
        [event] = (await audit.list_events(AuditFilter(kinds=("memory.forget",)))).items
        assert (event.actor, event.agent_id) == ("admin", agent_id)
        assert event.target == entity_id_for(agent_id, "api", "ana")
        assert event.detail["messages"] == 1 and event.detail["replies"] == 1
        assert event.detail["entity_record"] is True

    cli = carrier_cli("memory", "forget", "Bob", "-a", agent_id, "--yes", data_dir=data_dir)
    assert cli.returncode == 0, cli.stderr
    listed = carrier_cli("audit", "--json", "--kind", "memory.forget", data_dir=data_dir)
    assert listed.returncode == 0, listed.stderr
    forgets = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(e["actor"], e["agent_id"]) for e in forgets] == [
        (cli_actor(), agent_id),
        ("admin", agent_id),
    ]
    assert forgets[0]["target"] == entity_id_for(agent_id, "api", "bob")

    table = carrier_cli("audit", "--agent", "Pilot", "--actor", "admin", data_dir=data_dir)
    assert table.returncode == 0, table.stderr
    assert "DELETE /agents/{agent_id}/entities/{entity_id}/memories" in table.stdout
    assert "memory.forget" in table.stdout and "agent.start" in table.stdout
    assert "refused" not in table.stdout and cli_actor() not in table.stdout
    since = carrier_cli("audit", "--json", "--since", "1h", "--limit", "2", data_dir=data_dir)
    assert len(since.stdout.splitlines()) == 2 and "--cursor" in since.stderr
    bad = carrier_cli("audit", "--kind", "not a kind", data_dir=data_dir)
    assert bad.returncode == 2 and "is not a kind" in bad.stderr


async def test_audit_records_what_the_front_door_refuses(
    audited: tuple[httpx.AsyncClient, Callable[..., httpx.AsyncClient]], audit: AuditLog
) -> None:
    admin, _ = audited
    page = await admin.post("/agents", json=CHARACTER, headers={"Origin": "https://evil.example"})
    rebound = await admin.post("/agents", json=CHARACTER, headers={"Host": "attacker.example"})
    assert (page.status_code, rebound.status_code) == (403, 421)
    assert (await admin.get("/agents")).json() == []  # nothing was created

    events = (await audit.list_events(AuditFilter(kinds=("api.call",)))).items
    assert [(e.actor, e.action, e.target, e.detail["status"]) for e in reversed(events)] == [
        ("anonymous", "POST (no route)", "/agents", 403),
        ("anonymous", "POST (no route)", "/agents", 421),
    ]


# -- redactions ------------------------------------------------------------------------------------


async def test_audit_never_stores_a_known_secret_value(
    audit: AuditLog, audit_factory: AuditFactory
) -> None:
    """A value the edge taught the redactor (an environment value a persona references) has no
    shape of its own; it is kept out all the same."""
    known = "correct-horse-battery-staple-42"
    with using_redactor(Redactor([known])):
        await audit.record(
            AuditKind.TOOL_CALL, actor="admin", detail={"error": f"the service said {known}"}
        )
    assert known not in dump(audit_factory.raw())


async def test_audit_records_redactions_summed_per_exit(
    audit: AuditLog, audit_factory: AuditFactory
) -> None:
    known = "correct-horse-battery-staple-42"
    redactor = Redactor([known])
    recorder = RedactionRecorder(audit, interval_s=3600)
    with using_redactor(redactor):
        recorder.start()
        redactor.redact(f"the key is {known}", where="api")
        redactor.redact(f"{OPENAI} and {GITHUB}", where="api")
        # The logging filter redacts on whatever thread logs: heard from there too.
        await asyncio.to_thread(redactor.redact, f"retrying with {OPENAI}", where="log")
        redactor.redact("nothing secret here", where="discord")
        assert await recorder.flush() == 2
        redactor.redact(PEM, where="log")
        await recorder.stop()
        redactor.redact(OPENAI, where="api")  # after stop: not heard
        assert await recorder.flush() == 0

    events = (await audit.list_events(AuditFilter(kinds=("safety.redaction",)))).items
    summary = sorted(
        (e.detail["where"], e.detail["secrets"], e.detail["redactions"]) for e in events
    )
    assert summary == [("api", 3, 2), ("log", 1, 1), ("log", 1, 1)]
    api = next(e for e in events if e.detail["where"] == "api")
    assert api.actor == "system" and api.result == "ok"
    assert "known value" in api.detail["kinds"] and len(api.detail["kinds"]) == 3
    stored = dump(audit_factory.raw())
    assert known not in stored and OPENAI not in stored and GITHUB not in stored
