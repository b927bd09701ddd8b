"""AgentManager: many agents in one process, each started, stopped and edited on its own."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from carrier.agents import (
    AgentExists,
    AgentManager,
    AgentNotFound,
    AgentNotRunning,
    ClientConfigError,
)
from carrier.agents.imports import load_files
from carrier.character import Character, load_character
from carrier.clients import Client, ClientUnavailable
from carrier.errors import CharacterError
from carrier.settings import Settings
from carrier.types import Author, Channel, Message, RoomKind
from tests.api.conftest import CHARACTER, HARBOR


class FakeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    greeting: str = "hi"
    channels: list[str] = []


class FakeClient(Client):
    name = "fake"

    def __init__(self, runtime: Any, config: Mapping[str, Any]) -> None:
        self.runtime, self.config = runtime, dict(config)
        self.started = self.stopped = False

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped = True

    def update_config(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)


class FakeFactory:
    config_model = FakeConfig

    def __init__(self) -> None:
        self.made: list[FakeClient] = []

    def __call__(
        self, runtime: Any, config: Mapping[str, Any], environ: Mapping[str, str]
    ) -> Client:
        client = FakeClient(runtime, config)
        self.made.append(client)
        return client


def unavailable(runtime: Any, config: Mapping[str, Any], environ: Mapping[str, str]) -> Client:
    raise ClientUnavailable("no token: set LOCKED_TOKEN")


def dm(text: str, user: str = "ana") -> Message:
    return Message(
        platform="api",
        author=Author(platform_id=user, name=user),
        channel=Channel(platform_id=f"api:{user}", kind=RoomKind.API),
        text=text,
    )


def character(**overrides: Any) -> Character:
    return Character.model_validate({**CHARACTER, **overrides})


async def test_agent_manager_create_twice_is_a_clear_conflict(manager: AgentManager) -> None:
    record = await manager.create(character())
    assert record.status == "stopped" and record.character["name"] == "Pilot"
    with pytest.raises(AgentExists, match="exists already"):
        await manager.create(character())
    assert [r.id for r in await manager.list()] == [record.id]
    with pytest.raises(AgentNotFound):
        await manager.get("nobody")


async def test_agent_manager_start_stop_one_agent_leaves_others_running(
    manager: AgentManager,
) -> None:
    a = await manager.create(character(name="Alpha"))
    b = await manager.create(character(name="Beta"))
    await manager.start(a.id)
    status = await manager.start(b.id)
    assert status.running and status.model == "function"
    result = await manager.runtime(a.id).handle(dm("hello"))
    assert "You said: hello" in result.text

    await manager.stop(a.id)
    with pytest.raises(AgentNotRunning, match="not running"):
        manager.runtime(a.id)
    assert not (await manager.status(a.id)).should_run
    assert (await manager.status(b.id)).should_run
    assert "You said: still" in (await manager.runtime(b.id).handle(dm("still"))).text


async def test_agent_manager_update_running_agent_keeps_runtime_and_applies_next_turn(
    manager: AgentManager,
) -> None:
    record = await manager.create(character())
    await manager.start(record.id)
    runtime = manager.runtime(record.id)

    await manager.update(record.id, character(name="Captain", bio=["Captain flies jets."]))

    assert manager.runtime(record.id) is runtime
    assert runtime.character.name == "Captain"
    assert (await manager.get(record.id)).name == "Captain"
    assert [r.id for r in await manager.list()] == [record.id]  # the id did not follow the name
    await runtime.handle(dm("who are you?"))
    prompt = runtime.model.requests[-1].messages[0].content  # type: ignore[attr-defined]
    assert "Captain flies jets." in prompt


async def test_agent_manager_delete_stops_and_removes_data(
    manager: AgentManager, settings: Settings
) -> None:
    record = await manager.create(character())
    await manager.start(record.id)
    await manager.runtime(record.id).handle(dm("remember me"))
    uploads = settings.data_dir / "uploads" / record.id
    uploads.mkdir(parents=True)
    (uploads / "f.txt").write_text("x")

    await manager.delete(record.id)

    assert await manager.store.get_agent(record.id) is None
    assert await manager.store.count_memories(agent_id=record.id) == 0
    assert not uploads.exists()
    with pytest.raises(AgentNotFound):
        await manager.delete(record.id)


async def test_agent_manager_starts_listed_clients_and_reports_skipped(
    make_manager: Callable[..., AgentManager], settings: Settings
) -> None:
    factory = FakeFactory()
    manager = make_manager(settings, client_factories={"fake": factory, "locked": unavailable})
    record = await manager.create(
        character(clients=["fake", "locked", "nowhere"], clientConfig={"fake": {"greeting": "yo"}})
    )
    status = await manager.start(record.id)
    assert status.clients == ["fake"]
    assert status.skipped == {
        "locked": "no token: set LOCKED_TOKEN",
        "nowhere": "no 'nowhere' client is installed in this version",
    }
    assert factory.made[0].started and factory.made[0].config == {"greeting": "yo"}
    await manager.close()
    assert factory.made[0].stopped


async def test_agent_manager_without_clients_answers_but_never_connects(
    make_manager: Callable[..., AgentManager], settings: Settings
) -> None:
    # The web process of a web + worker deployment: the worker runs the clients.
    factory = FakeFactory()
    manager = make_manager(settings, client_factories={"fake": factory}, start_clients=False)
    record = await manager.create(character(clients=["fake"]))
    status = await manager.start(record.id)
    assert status.running and status.clients == []
    assert "carrier serve --no-clients" in status.skipped["fake"]
    assert factory.made == []  # no connection made
    result = await manager.runtime(record.id).handle(dm("still there?"))
    assert result.replies  # the agent itself runs and answers
    await manager.close()


async def test_agent_manager_client_config_is_validated_stored_and_pushed(
    make_manager: Callable[..., AgentManager], settings: Settings
) -> None:
    factory = FakeFactory()
    manager = make_manager(settings, client_factories={"fake": factory})
    record = await manager.create(
        character(clients=["fake"], clientConfig={"fake": {"greeting": "yo"}})
    )
    await manager.start(record.id)

    with pytest.raises(ClientConfigError) as caught:
        await manager.set_client_config("fake", {"greeting": 3, "colour": "red"})
    assert {p.path for p in caught.value.problems} == {"greeting", "colour"}
    with pytest.raises(ClientConfigError, match="token"):
        await manager.set_client_config("other", {"token": "sk-literal-value-1234567890"})

    applied = await manager.set_client_config("fake", {"channels": ["general"]})
    assert applied == [record.id]
    assert factory.made[0].config == {"greeting": "yo", "channels": ["general"]}
    applied = await manager.set_client_config(f"{record.id}:fake", {"greeting": "ahoy"})
    assert factory.made[0].config == {"greeting": "ahoy", "channels": ["general"]}
    assert await manager.get_client_config("fake") == {"channels": ["general"]}
    with pytest.raises(AgentNotFound):
        await manager.set_client_config("missing:fake", {})
    await manager.close()


async def test_agent_manager_refuses_client_sections_its_clients_refuse_however_they_come(
    make_manager: Callable[..., AgentManager], settings: Settings, tmp_path: Path
) -> None:
    manager = make_manager(settings, client_factories={"fake": FakeFactory()})
    with pytest.raises(CharacterError) as created:
        await manager.create(character(clientConfig={"fake": {"greeting": 3}}))
    assert [(p.path, p.message) for p in created.value.problems] == [
        ("clientConfig.fake.greeting", "Input should be a valid string")
    ]
    assert await manager.list() == []
    record = await manager.create(character(clientConfig={"fake": {"greeting": "yo"}}))
    with pytest.raises(CharacterError, match=r"clientConfig\.fake\.colour"):
        await manager.update(record.id, character(clientConfig={"fake": {"colour": "red"}}))
    # A file imported by carrier run is refused the same way, its problem named.
    keeper = tmp_path / "keeper.json"
    keeper.write_text(
        json.dumps({"name": "Keeper", "bio": "ok", "clientConfig": {"fake": {"channels": "x"}}})
    )
    [report] = await load_files(manager, [keeper])
    assert report.error is not None and "clientConfig.fake.channels" in report.error
    assert [r.name for r in await manager.list()] == ["Pilot"]
    assert (await manager.head(record.id)).number == 1
    await manager.close()


async def test_agent_manager_load_files_upserts_and_starts(
    manager: AgentManager, tmp_path: Any
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"name": ')
    reports = await load_files(manager, [HARBOR, broken])
    assert reports[0].error is None and reports[0].status is not None
    assert reports[0].status.running
    assert "discord" in reports[0].status.skipped  # no DISCORD_API_TOKEN here
    assert reports[1].error is not None and "invalid JSON" in reports[1].error
    harbor = load_character(HARBOR)
    # loading again updates the stored agent instead of failing
    again = await load_files(manager, [HARBOR])
    assert again[0].error is None
    assert [r.id for r in await manager.list()] == [harbor.agent_id]


async def test_agent_manager_records_each_revision_in_the_audit_log(
    make_manager: Callable[..., AgentManager], settings: Settings, tmp_path: Path
) -> None:
    from carrier.audit.model import AuditFilter
    from carrier.audit.sqlite import SQLiteAuditLog
    from carrier.fleet.model import RevisionSource

    async with SQLiteAuditLog(path=tmp_path / "audit.db") as audit:
        manager = make_manager(settings, services={"audit": audit})
        try:
            record = await manager.create(character(name="Pilot"), actor="admin")
            await manager.update(
                record.id, character(name="Pilot", bio=["edited"]), source=RevisionSource.CLI
            )
            await manager.revert(record.id, 1)
        finally:
            await manager.close()
        page = await audit.list_events(AuditFilter(kinds=("character.revision",)))
    seen = sorted((e.detail["revision"], e.action, e.actor) for e in page.items)
    assert seen == [(1, "api", "admin"), (2, "cli", None), (3, "revert", None)]
    assert {e.agent_id for e in page.items} == {record.id}
