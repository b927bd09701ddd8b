"""The web + worker split keeps its word, with real processes: ``carrier serve --no-clients`` (the
web) and ``carrier run --no-api`` (the worker) on one store — a SQLite file, or the loopback
MongoDB-compatible server — and a fake Discord in the test counting each identify.

- An agent created and started through the web's API connects on the worker (the web never
  connects), answers there, comes back by itself after both processes restart, and a stop
  through the API disconnects it.
- A character file edited after an API edit is not imported: the worker names both revisions;
  ``--prefer file`` or ``--prefer store`` settles it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from clients.discord.fake import FakeDiscord
from tests.deploy.procs import ADMIN_TOKEN as ADMIN
from tests.deploy.procs import CarrierProcess, base_env, free_port
from tests.mongo_servers import MongoServer

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]


PILOT: dict[str, Any] = {
    "name": "Pilot",
    "bio": ["Pilot guides ships into the harbour."],
    "clients": ["discord"],
    "messageExamples": [
        [
            {"user": "{{user1}}", "content": {"text": "hi"}},
            {"user": "Pilot", "content": {"text": "Hello, Pilot here."}},
        ]
    ],
}


@pytest.fixture(params=["sqlite", "mongo"])
def store_env(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., dict[str, str]]:
    """Builds a process environment on the test's store (one data dir, one database)."""
    uri = None
    if request.param == "mongo":
        server: MongoServer = request.getfixturevalue("mongo_compatible_server")
        uri = server.database_uri(f"deploy_{uuid.uuid4().hex[:10]}")
    characters = tmp_path / "characters"
    characters.mkdir()

    def env(**extra: str) -> dict[str, str]:
        return base_env(
            tmp_path / "data",
            mongodb_uri=uri,
            CARRIER_CHARACTERS_DIR=str(characters),
            **extra,
        )

    return env


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        yield fake


def identifies(fake: FakeDiscord) -> int:
    return sum(1 for data in fake.gateway.identifies if data.get("token") == fake.token)


async def until(check: Callable[[], bool], what: str, *procs: CarrierProcess) -> None:
    """Wait for ``check``, bounded against hanging (never a measure of speed)."""
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + 90
    while not check():
        if loop.time() > deadline:
            logs = "\n\n".join(f"--- {p.name}\n{p.output[-3000:]}" for p in procs)
            raise AssertionError(f"never: {what}\n{logs}")
        await asyncio.sleep(0.05)


class Deployment:
    """One web and one worker on one store; ``restart()`` stops both and starts both again."""

    def __init__(self, env: dict[str, str], port: int) -> None:
        self.env, self.port = env, port
        self.web: CarrierProcess | None = None
        self.worker: CarrierProcess | None = None

    async def start(self, *worker_args: str) -> None:
        self.web = CarrierProcess.start(
            "serve", "--no-clients", "--port", str(self.port), env=self.env, name="web"
        )
        await self.web.wait_for("agent API and console on")
        await self.start_worker(*worker_args)

    async def start_worker(self, *args: str) -> CarrierProcess:
        self.worker = CarrierProcess.start("run", "--no-api", *args, env=self.env, name="worker")
        await self.worker.wait_for("running (Ctrl-C to stop)")
        return self.worker

    def stop(self) -> None:
        for proc in (self.worker, self.web):
            if proc is not None:
                assert proc.stop() == 0, proc.output[-3000:]

    @property
    def procs(self) -> tuple[CarrierProcess, ...]:
        return tuple(p for p in (self.web, self.worker) if p is not None)

    def api(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{self.port}",
            headers={"Authorization": f"Bearer {ADMIN}"},
            timeout=60,
        )


async def test_an_api_started_agent_runs_on_the_worker_across_restarts_until_stopped(
    store_env: Callable[..., dict[str, str]], discord: FakeDiscord
) -> None:
    guild = discord.add_guild("Harbour", ["general"])
    ana = discord.add_member(guild, "ana")
    env = store_env(CARRIER_TEST_DISCORD_URL=discord.base_url, DISCORD_API_TOKEN=discord.token)
    deployment = Deployment(env, free_port())
    await deployment.start()
    try:
        async with deployment.api() as api:
            created = await api.post("/agents", json=PILOT)
            assert created.status_code == 201, created.text
            agent_id = created.json()["id"]
            assert identifies(discord) == 0  # created stopped: nobody connects
            started = await api.post(f"/agents/{agent_id}/start")
            assert started.status_code == 200, started.text
            # The web runs it for the API, never with its clients; the worker connects.
            assert started.json()["clients"] == []
            await until(lambda: identifies(discord) == 1, "the worker connects", *deployment.procs)
            await until(lambda: len(discord.gateway.sessions) == 1, "one session")

            await discord.post(ana, f"hi <@{discord.bot_id}>", channel=guild.channels["general"])
            await until(lambda: len(discord.sent) >= 1, "a reply", *deployment.procs)
            assert "re: " in str(discord.sent[0].payload.get("content"))

        # Both processes restart (a deploy, a reboot): the agent comes back by itself.
        deployment.stop()
        await until(lambda: len(discord.gateway.sessions) == 0, "the worker disconnected")
        await deployment.start()
        await until(lambda: identifies(discord) == 2, "back after the restart", *deployment.procs)
        async with deployment.api() as api:
            shown = (await api.get(f"/agents/{agent_id}")).json()
            assert shown["status"] == "running", shown

            stopped = await api.post(f"/agents/{agent_id}/stop")
            assert stopped.status_code == 200, stopped.text
            await until(
                lambda: len(discord.gateway.sessions) == 0,
                "the stop reaches the worker",
                *deployment.procs,
            )
        assert identifies(discord) == 2  # the web never identified, the worker once per start
        worker = deployment.worker
        assert worker is not None and worker.proc.poll() is None  # a worker outlives its agents
    finally:
        deployment.stop()


@pytest.mark.parametrize("store_env", ["sqlite"], indirect=True)  # the import logic is the
# same on MongoDB, whose fleet store the contract suite covers; this keeps the suite short
async def test_a_file_edited_after_an_api_edit_is_refused_until_prefer_says(
    store_env: Callable[..., dict[str, str]], tmp_path: Path
) -> None:
    env = store_env()
    characters = Path(env["CARRIER_CHARACTERS_DIR"])
    pilot = characters / "pilot.yaml"
    pilot.write_text("name: Pilot\nbio: [Pilot guides ships.]\nclients: []\n")
    deployment = Deployment(env, free_port())
    await deployment.start()  # the worker imports the file: revision 1
    try:
        async with deployment.api() as api:
            [agent] = (await api.get("/agents")).json()
            agent_id = agent["id"]
            edited = dict(agent["character"], bio=["Pilot guides ships, edited in the console."])
            put = await api.put(f"/agents/{agent_id}", json=edited)
            assert put.status_code == 200, put.text  # revision 2, by the admin token

        worker = deployment.worker
        assert worker is not None and worker.stop() == 0
        pilot.write_text("name: Pilot\nbio: ['Pilot guides ships, edited in the file.']\n")
        worker = await deployment.start_worker()
        assert worker.has(f"skipped {pilot}: {pilot} changed since it was imported as revision 1")
        assert worker.has("was changed elsewhere: the store holds revision 2 (api")
        assert worker.has("--prefer file")
        async with deployment.api() as api:
            kept = (await api.get(f"/agents/{agent_id}")).json()["character"]["bio"]
            assert kept == ["Pilot guides ships, edited in the console."]

        # --prefer store: the store stands, and the file is not asked about again.
        assert worker.stop() == 0
        worker = await deployment.start_worker("--prefer", "store")
        assert worker.has("kept the store's revision 2")
        assert worker.stop() == 0
        worker = await deployment.start_worker()
        assert not worker.has("skipped")
        assert worker.has(f"{pilot} is unchanged since its import; the store's revision 2")

        # --prefer file: the file becomes revision 3, and the running web takes it.
        assert worker.stop() == 0
        worker = await deployment.start_worker("--prefer", "file")
        assert worker.has(f"imported {pilot} as revision 3 of {agent_id}")
        async with deployment.api() as api:
            now = (await api.get(f"/agents/{agent_id}")).json()["character"]["bio"]
            assert now == ["Pilot guides ships, edited in the file."]
    finally:
        deployment.stop()
