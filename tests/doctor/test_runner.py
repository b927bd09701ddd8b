"""The doctor's deployment and model checks, run in process: one failure injected per check."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from carrier.doctor import ClientTarget, Result, fail, ok
from carrier.doctor.render import render_text
from carrier.memory.sqlite import SCHEMA_VERSION, SQLiteStore
from tests.doctor.conftest import World
from tests.llm.openai_server import FakeOpenAIServer, Reply


def named(results: Sequence[Result], name: str, persona: str | None = None) -> Result:
    found = [r for r in results if r.name == name and r.persona == persona]
    assert len(found) == 1, (name, persona, results)
    return found[0]


async def test_doctor_green_with_a_model_answering(
    world: World, openai_server: FakeOpenAIServer, model_env: dict[str, str]
) -> None:
    world.env.update(model_env)
    world.persona("Ada")

    report = await world.doctor()

    assert report.exit_code == 0, render_text(report)
    assert [r.status for r in report.results] == ["ok"] * 6, render_text(report)
    model = named(report.results, "model", "Ada")
    assert model.detail == f"openai/doctor-test at {openai_server.base_url} answered"
    (call,) = openai_server.requests
    assert call.body["max_tokens"] == 1


async def test_doctor_personas_share_one_model_call(
    world: World, openai_server: FakeOpenAIServer, model_env: dict[str, str]
) -> None:
    world.env.update(model_env)
    world.persona("Ada")
    world.persona("Bo")

    report = await world.doctor()

    assert report.exit_code == 0
    assert len(openai_server.requests) == 1


async def test_doctor_model_401_fails_with_the_fix_and_no_key(
    world: World,
    openai_server: FakeOpenAIServer,
    model_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "sk-doctor-wrong-key-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key)  # litellm reads the process environment
    world.env.update(model_env, OPENAI_API_KEY=key)
    world.persona("Ada")
    openai_server.queue(Reply(status=401))

    report = await world.doctor()

    assert report.exit_code == 1
    model = named(report.results, "model", "Ada")
    assert model.status == "fail"
    assert "the key was refused (HTTP 401)" in model.detail
    assert model.fix.startswith("check OPENAI_API_KEY")
    assert key not in render_text(report)


async def test_doctor_offline_personas_say_why(world: World) -> None:
    world.persona("Ada")
    world.persona("Bo", modelProvider="anthropic")

    report = await world.doctor()

    assert report.exit_code == 0  # offline works: nothing a persona needs fails
    ada, bo = named(report.results, "model", "Ada"), named(report.results, "model", "Bo")
    assert ada.status == "ok" and ada.detail.startswith("offline: no model is configured")
    assert bo.status == "warn"
    assert "asks for anthropic/claude-3-5-haiku-latest, but ANTHROPIC_API_KEY is not set" in (
        bo.detail
    )
    assert "set ANTHROPIC_API_KEY" in bo.fix


async def test_doctor_fallback_without_a_key_is_a_warning(
    world: World, openai_server: FakeOpenAIServer, model_env: dict[str, str]
) -> None:
    world.env.update(model_env)
    world.persona("Ada", settings={"modelFallbacks": ["anthropic/claude-3-5-haiku-latest"]})

    report = await world.doctor()

    assert report.exit_code == 0
    fallback = named(report.results, "fallback model", "Ada")
    assert fallback.status == "warn" and "ANTHROPIC_API_KEY is not set" in fallback.detail


async def test_doctor_port_busy(world: World) -> None:
    world.persona("Ada")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]

        report = await world.doctor(port=port)

    assert report.exit_code == 1
    result = named(report.results, "API port")
    assert result.status == "fail" and f"port {port} on 127.0.0.1 is in use" in result.detail
    assert f"--port {port + 1}" in result.fix


async def test_doctor_port_not_checked_without_the_api(world: World) -> None:
    world.persona("Ada")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        report = await world.doctor(port=busy.getsockname()[1], serve_api=False)

    assert report.exit_code == 0
    assert named(report.results, "API port").status == "skip"


async def test_doctor_public_address_needs_an_admin_token(world: World) -> None:
    world.persona("Ada")

    report = await world.doctor(host="0.0.0.0")

    port = named(report.results, "API port")
    assert port.status == "fail" and "CARRIER_ADMIN_TOKEN" in port.fix


async def test_doctor_data_dir_cannot_be_created(world: World) -> None:
    blocker = world.tmp / "a-file"
    blocker.write_text("not a directory")
    world.env["CARRIER_DATA_DIR"] = str(blocker / "data")
    world.persona("Ada")

    report = await world.doctor()

    assert report.exit_code == 1
    data = named(report.results, "data dir")
    assert data.status == "fail" and "cannot be created" in data.detail
    assert "set CARRIER_DATA_DIR to a directory this user can write" in data.fix
    assert named(report.results, "store").status == "skip"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
async def test_doctor_data_dir_not_writable(world: World) -> None:
    # /proc/self exists and is a directory that nobody, not even root, can create files in.
    world.env["CARRIER_DATA_DIR"] = "/proc/self"
    world.persona("Ada")

    report = await world.doctor()

    data = named(report.results, "data dir")
    assert data.status == "fail" and "/proc/self is not writable" in data.detail
    assert "chmod 700 /proc/self" in data.fix
    assert report.exit_code == 1


async def test_doctor_data_dir_readable_by_others_is_a_warning(world: World) -> None:
    world.data_dir.chmod(0o755)
    world.persona("Ada")

    report = await world.doctor()

    assert report.exit_code == 0
    data = named(report.results, "data dir")
    assert data.status == "warn" and "mode 0755" in data.detail
    assert data.fix == f"chmod 700 {world.data_dir}"


async def test_doctor_store_from_a_newer_carrier(world: World) -> None:
    world.persona("Ada")
    async with SQLiteStore(path=world.data_dir / "carrier.db"):
        pass
    with sqlite3.connect(world.data_dir / "carrier.db") as db:
        db.execute(
            "INSERT INTO schema_version (version, applied_at) VALUES (?, 'later')",
            (SCHEMA_VERSION + 1,),
        )

    report = await world.doctor()

    store = named(report.results, "store")
    assert store.status == "fail"
    assert f"schema version {SCHEMA_VERSION + 1} is newer than this Carrier supports" in (
        store.detail
    )
    assert report.exit_code == 1


async def test_doctor_store_not_a_database(world: World) -> None:
    (world.data_dir / "carrier.db").write_text("this is not SQLite")
    world.persona("Ada")

    store = named((await world.doctor()).results, "store")

    assert store.status == "fail" and "cannot be read as a Carrier store" in store.detail


async def test_doctor_store_current_serves_stored_agents_as_warnings(
    world: World, openai_server: FakeOpenAIServer, model_env: dict[str, str]
) -> None:
    from carrier.character import Character, character_data
    from carrier.types import AgentRecord

    world.env.update(model_env)
    world.persona("Ada")
    stored = Character.model_validate(
        {"name": "Stored", "bio": ["made through the API"], "clients": ["nosuch"]}
    )
    async with SQLiteStore(path=world.data_dir / "carrier.db") as store:
        await store.upsert_agent(
            AgentRecord(id=stored.agent_id, name="Stored", character=character_data(stored))
        )
    openai_server.failing_models.add("doctor-test")  # every call fails (litellm drops "openai/")

    report = await world.doctor()

    assert named(report.results, "store").detail.endswith(f"schema {SCHEMA_VERSION}")
    assert named(report.results, "model", "Ada").status == "fail"
    stored_model = named(report.results, "model", "Stored")
    assert stored_model.status == "warn"  # not needed: carrier run does not start it
    assert "stored agent" in named(report.results, "persona", "Stored").detail
    assert named(report.results, "nosuch", "Stored").status == "warn"
    skipped = await world.doctor(stored=False)
    assert not [r for r in skipped.results if r.persona == "Stored"]


async def test_doctor_mongo_unreachable(world: World) -> None:
    world.persona("Ada")
    with socket.socket() as closed:  # bound, not listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        world.env["CARRIER_MONGODB_URI"] = f"mongodb://doctor:s3cret-pass@127.0.0.1:{port}/carrier"

        report = await world.doctor(wait=1.0)

    assert report.exit_code == 1
    store = named(report.results, "store")
    assert store.status == "fail" and "no server answered" in store.detail
    assert f"mongodb://127.0.0.1:{port}/carrier" in store.detail
    assert "CARRIER_MONGODB_URI" in store.fix
    assert "s3cret-pass" not in render_text(report)


async def test_doctor_mongo_uri_that_is_not_one(world: World) -> None:
    world.persona("Ada")
    world.env["CARRIER_MONGODB_URI"] = "postgres://somewhere/carrier"

    store = named((await world.doctor()).results, "store")

    assert store.status == "fail" and store.detail == "not a MongoDB URI (postgres)"


async def test_doctor_invalid_settings(world: World) -> None:
    world.env["CARRIER_RECENT_MESSAGES"] = "many"

    report = await world.doctor()

    assert [(r.name, r.status) for r in report.results] == [("settings", "fail")]
    assert "CARRIER_RECENT_MESSAGES" in report.results[0].detail


async def test_doctor_personas_missing_or_broken(world: World) -> None:
    empty = await world.doctor()
    assert named(empty.results, "personas").status == "fail"
    assert empty.exit_code == 1

    world.persona("Ada")
    broken = world.tmp / "characters" / "broken.json"
    broken.write_text('{"name": ""}')
    report = await world.doctor()
    failure = named(report.results, "persona", str(broken))
    assert (
        failure.status == "fail" and failure.fix == f"carrier validate {broken} shows every problem"
    )
    assert named(report.results, "persona", "Ada").status == "ok"


async def test_doctor_runs_adapter_checks_and_survives_a_broken_one(world: World) -> None:
    seen: list[ClientTarget] = []

    async def good(target: ClientTarget) -> list[Result]:
        seen.append(target)
        return [ok("chat token", f"{target.secret_var('CHAT_TOKEN')} accepted")]

    async def broken(target: ClientTarget) -> list[Result]:
        raise RuntimeError(f"exploded near {target.secret('CHAT_TOKEN')}")

    world.env["ADA_CHAT_TOKEN"] = "tok-very-secret-value"
    world.persona(
        "Ada",
        clients=["chat", "broken"],
        clientConfig={"chat": {"room": "lobby"}},
        settings={"secrets": {"CHAT_TOKEN": "$ADA_CHAT_TOKEN"}},
    )

    report = await world.doctor(client_checks={"chat": good, "broken": broken})

    assert named(report.results, "chat token", "Ada").detail == "ADA_CHAT_TOKEN accepted"
    assert seen[0].config == {"room": "lobby"} and seen[0].persona == "Ada"
    crashed = named(report.results, "broken", "Ada")
    assert crashed.status == "fail" and "RuntimeError" in crashed.detail
    assert "tok-very-secret-value" not in render_text(report)
    assert report.exit_code == 1


async def test_doctor_client_config_stored_through_the_api_applies(world: World) -> None:
    from carrier.character import load_character

    seen: list[ClientTarget] = []

    async def chat(target: ClientTarget) -> list[Result]:
        seen.append(target)
        return [fail("chat", "nope", "fix it")] if target.config.get("room") == "x" else []

    path = world.persona("Ada", clients=["chat"], clientConfig={"chat": {"room": "lobby"}})
    agent_id = load_character(path).agent_id
    async with SQLiteStore(path=world.data_dir / "carrier.db") as store:
        await store.set_setting("client_config:chat", {"room": "x", "shared": True})
        await store.set_setting(f"client_config:{agent_id}:chat", {"room": "hall"})

    report = await world.doctor(client_checks={"chat": chat})

    assert seen[0].config == {"room": "hall", "shared": True}
    assert seen[0].store is not None
    assert report.exit_code == 0
