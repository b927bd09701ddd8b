"""``/health`` with the clients' states, ``/health/live`` and ``/health/ready``: a real Discord
client (discord.py against the loopback fake Discord) in a real AgentManager, through the app.

The must-show: a Discord gateway that refuses connections for a while, then accepts; the client
connects without a restart, and ``/health`` said ``degraded`` meanwhile. "A while" is counted in
refused attempts (several backoff rounds, with a tiny backoff), not in seconds."""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from carrier.agents import AgentManager
from carrier.api import ApiSettings, create_app
from carrier.api.readiness import Startup
from carrier.settings import Settings
from tests.api.conftest import CHARACTER, create_running

with warnings.catch_warnings():
    # discord.py imports the stdlib's audioop (voice support), deprecated since Python 3.11.
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    from clients.discord.fake import FakeDiscord

WITHIN = 30.0
POLL = 0.02
"""Between two looks at /health (which stays within the API's rate limit)."""

DISCORD_AGENT: dict[str, Any] = {
    **CHARACTER,
    "name": "Harbor",
    "clients": ["discord"],
    "clientConfig": {"discord": {"reconnect": {"initialSeconds": 0.01, "maxSeconds": 0.05}}},
    "settings": {"secrets": {"DISCORD_API_TOKEN": "$DISCORD_API_TOKEN"}},
}


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(bot_name="Harbor") as fake:
        fake.add_guild("Jam Club", ["general"])
        yield fake


@pytest.fixture
def serve(
    make_manager: Callable[..., AgentManager],
    settings: Settings,
    api_settings: ApiSettings,
    make_client: Callable[..., httpx.AsyncClient],
) -> Any:
    """``async with serve(environ=..., start_clients=...) as (http, manager)``."""

    @contextlib.asynccontextmanager
    async def run(
        *, environ: dict[str, str], startup: Startup | None = None, **kw: Any
    ) -> AsyncIterator[tuple[httpx.AsyncClient, AgentManager]]:
        manager = make_manager(settings, environ=environ, **kw)
        app = create_app(manager, settings, api_settings=api_settings, startup=startup)
        try:
            async with make_client(app) as http:
                yield http, manager
        finally:
            await manager.close()

    return run


async def discord_health(http: httpx.AsyncClient) -> tuple[str, dict[str, Any]]:
    body = (await http.get("/health")).json()
    [agent] = body["agents"]
    return body["status"], agent["clients"]["discord"]


async def test_health_degraded_while_discord_refuses_then_ok_without_a_restart(
    serve: Any, fake: FakeDiscord
) -> None:
    fake.refuse()  # Discord is down: its API and its gateway answer 503
    async with serve(environ={"DISCORD_API_TOKEN": fake.token}) as (http, manager):
        agent_id = await create_running(http, DISCORD_AGENT)  # the start does not fail
        client = manager.client(agent_id, "discord")
        assert client is not None

        status, discord = await discord_health(http)
        assert status == "degraded" and discord["status"] == "retrying"
        assert "Discord is unavailable (HTTP 503)" in discord["last_error"]
        assert discord["since"] and discord["attempts"] >= 1
        public = (await http.get("/health", headers={"Authorization": ""})).json()
        assert public == {"status": "degraded", "store": "ok", "agents": None}

        # Several backoff rounds, /health degraded at each look.
        looks = 0
        async with asyncio.timeout(WITHIN):
            while fake.refused["rest"] < 4:
                status, discord = await discord_health(http)
                assert (status, discord["status"]) == ("degraded", "retrying")
                looks += 1
                await asyncio.sleep(POLL)
        assert looks >= 1 and not fake.gateway.identifies

        fake.accept()
        async with asyncio.timeout(WITHIN):
            while True:
                if (await discord_health(http))[1]["status"] == "connected":
                    break
                await asyncio.sleep(POLL)
        status, discord = await discord_health(http)
        assert status == "ok" and discord["last_error"] is None and discord["attempts"] == 0
        assert manager.client(agent_id, "discord") is client  # the same client: no restart
        assert len(fake.gateway.identifies) == 1
        ready = await http.get("/health/ready")
        assert ready.status_code == 200  # clients never made it unready


async def test_health_refused_token_is_failed_with_the_fix_and_no_secret(
    serve: Any, fake: FakeDiscord
) -> None:
    wrong = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.wrong-token-abcdefghijklmnopqrstuvwx"
    async with serve(environ={"DISCORD_API_TOKEN": wrong}) as (http, manager):
        agent_id = await create_running(http, DISCORD_AGENT)
        assert manager.client(agent_id, "discord") is None  # skipped: retrying cannot help
        response = await http.get("/health")
        status, discord = await discord_health(http)
        assert status == "degraded" and discord["status"] == "failed"
        assert "refused the bot token" in discord["last_error"]
        assert "Reset Token" in discord["last_error"]
        assert wrong not in response.text and "wrong-token" not in response.text


async def test_health_unconfigured_and_elsewhere_clients_do_not_degrade(
    serve: Any, fake: FakeDiscord
) -> None:
    async with serve(environ={}) as (http, _):  # no token here
        await create_running(http, DISCORD_AGENT)
        status, discord = await discord_health(http)
        assert status == "ok" and discord["status"] == "not_configured"
        assert "DISCORD_API_TOKEN is not set" in discord["last_error"]
    # The web process of a web + worker deployment: its worker runs the clients.
    async with serve(environ={"DISCORD_API_TOKEN": fake.token}, start_clients=False) as (
        http,
        _,
    ):
        await create_running(http, {**DISCORD_AGENT, "name": "Harbor2"})
        status, discord = await discord_health(http)
        assert status == "ok" and discord["status"] == "elsewhere" and not fake.gateway.identifies


async def test_health_live_and_ready_need_no_token(
    serve: Any, make_client: Callable[..., httpx.AsyncClient]
) -> None:
    startup = Startup.pending("restoring agents")
    async with serve(environ={}, startup=startup) as (http, manager):
        anonymous = {"Authorization": ""}
        live = await http.get("/health/live", headers=anonymous)
        assert (live.status_code, live.json()) == (200, {"status": "ok"})

        not_yet = await http.get("/health/ready", headers=anonymous)
        assert not_yet.status_code == 503
        assert not_yet.json() == {
            "status": "starting",
            "reason": "still starting: restoring agents",
        }

        startup.finish()
        ready = await http.get("/health/ready", headers=anonymous)
        assert (ready.status_code, ready.json()) == (200, {"status": "ready", "reason": None})

        await manager.store.close()
        try:
            down = await http.get("/health/ready", headers=anonymous)
            assert down.status_code == 503 and down.json()["status"] == "unavailable"
            assert down.json()["reason"].startswith("the store is unreachable (")
            assert (await http.get("/health/live", headers=anonymous)).status_code == 200
        finally:
            await manager.store.open()


async def test_the_web_shows_the_clients_its_worker_runs_as_the_worker_reports_them(
    serve: Any, fake: FakeDiscord, make_manager: Callable[..., AgentManager], settings: Settings
) -> None:
    env = {"DISCORD_API_TOKEN": fake.token}
    fake.refuse()  # Discord is down when the worker starts
    async with serve(environ=env, start_clients=False) as (http, _web):
        agent_id = await create_running(http, DISCORD_AGENT)
        assert (await discord_health(http))[1]["status"] == "elsewhere"  # no worker yet

        worker = make_manager(
            settings, environ={**env, "CARRIER_WORKER_ID": "worker-1"}, serves_api=False
        )
        fleet = await worker.fleet()
        await fleet.acquire("worker:worker-1", "worker-1", ttl_s=60)  # `carrier run` holds it
        try:
            await worker.run(agent_id)
            client = worker.client(agent_id, "discord")
            assert client is not None
            await worker.reports.publish()  # (it also publishes by itself every few seconds)
            status, discord = await discord_health(http)
            assert (status, discord["status"], discord["process"]) == (
                "degraded",
                "retrying",
                "worker-1",
            )
            assert "Discord is unavailable (HTTP 503)" in discord["last_error"]

            fake.accept()
            async with asyncio.timeout(WITHIN):
                while True:
                    if client.state.status.value == "connected":
                        break
                    await asyncio.sleep(POLL)
            await worker.reports.publish()
            status, discord = await discord_health(http)
            assert (status, discord["status"], discord["process"]) == (
                "ok",
                "connected",
                "worker-1",
            )
            assert fake.token not in (await http.get("/health")).text
        finally:
            await fleet.release("worker:worker-1", "worker-1")
            await worker.close()
        # The worker is gone: its report no longer counts.
        status, discord = await discord_health(http)
        assert (status, discord["status"], discord["process"]) == ("ok", "elsewhere", None)
