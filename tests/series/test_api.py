"""``GET /metrics/series`` and ``GET /metrics/summary`` on SQLite and on MongoDB: turns sent
through the API come back as lines per agent or summed, latencies as p50/p95; an agent's token
reads its own agent only; ranges and names are checked; budgets show in the summary."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from carrier.agents import AgentManager
from carrier.api import ApiSettings, create_app
from carrier.api.routes import series as series_routes
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.series import HostSeries, open_host_series
from carrier.settings import load_settings
from tests.api.conftest import ADMIN, bearer
from tests.series.conftest import SeriesFactory
from tests.series.test_host import PRICES, answer

LIMITED = {"name": "Pilot", "bio": ["flies"], "settings": {"budget": {"dailyUsd": 0.001}}}


class World:
    def __init__(self, http: httpx.AsyncClient, host: HostSeries, manager: AgentManager) -> None:
        self.http, self.host, self.manager = http, host, manager

    async def agent(self, data: dict[str, Any]) -> str:
        created = await self.http.post("/agents", json=data)
        assert created.status_code == 201, created.text
        agent_id: str = created.json()["id"]
        assert (await self.http.post(f"/agents/{agent_id}/start")).status_code == 200
        return agent_id

    async def say(self, agent_id: str, text: str) -> None:
        sent = await self.http.post(f"/{agent_id}/message", json={"text": text})
        assert sent.status_code == 200, sent.text

    async def flush(self) -> None:
        assert self.host.recorder is not None
        await self.host.recorder.flush()


@pytest.fixture
async def world(tmp_path: Path, series_factory: SeriesFactory) -> AsyncIterator[World]:
    env = {
        **series_factory.settings_env(),
        "CARRIER_ADMIN_TOKEN": ADMIN,
        "CARRIER_SERIES_FLUSH_SECONDS": "3600",  # the test flushes
    }
    settings = load_settings(env)
    model = FunctionModel(answer, model="big", prices=PRICES)
    async with SQLiteStore(path=tmp_path / "memory.db") as store:
        manager = AgentManager(
            store=store,
            embedder=HashEmbedder(),
            settings=settings,
            environ=env,
            model_factory=lambda character: model,
            start_clients=False,
        )
        host = await open_host_series(settings, manager)
        app = create_app(
            manager, settings, api_settings=ApiSettings(rate_per_minute=6000, rate_burst=1000)
        )
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
        try:
            async with httpx.AsyncClient(
                transport=transport, base_url="http://localhost", headers=bearer(ADMIN)
            ) as http:
                yield World(http, host, manager)
        finally:
            await manager.close()
            await host.aclose()


def by(lines: list[dict[str, Any]]) -> dict[tuple[str, str | None], list[Any]]:
    return {(x["name"], x["agent_id"]): [v for _, v in x["points"]] for x in lines}


@pytest.mark.parametrize("second", [0.0, 30.25, 59.5])
async def test_series_default_window_is_the_same_at_any_second_of_the_minute(
    world: World, monkeypatch: pytest.MonkeyPatch, second: float
) -> None:
    """An hour of minutes and this one, 30 days and today: never one short because the request
    came in the last second of a minute."""
    at = 1_795_894_800 + second  # 2026-11-28 19:40:00 UTC, plus the second
    monkeypatch.setattr(series_routes.time, "time", lambda: at)
    total = {"name": "turns", "group": "total"}
    minutes = (await world.http.get("/metrics/series", params=total)).json()
    assert [p[0] for p in minutes["lines"][0]["points"]] == list(
        range(1_795_894_800 - 3600, 1_795_894_800 + 60, 60)
    )
    days = (await world.http.get("/metrics/series", params={**total, "step": "day"})).json()
    today = 1_795_894_800 // 86_400 * 86_400
    assert [p[0] for p in days["lines"][0]["points"]] == list(
        range(today - 30 * 86_400, today + 86_400, 86_400)
    )


async def test_series_endpoint_lines_per_agent_and_summed(world: World) -> None:
    pilot = await world.agent({"name": "Pilot", "bio": ["flies"]})
    skipper = await world.agent({"name": "Skipper", "bio": ["sails"]})
    for text in ("one", "two"):
        await world.say(pilot, text)
    await world.say(skipper, "three")
    await world.flush()

    names = ["turns", "cost_usd", "latency.generate", "errors"]
    got = await world.http.get("/metrics/series", params={"name": names})
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["step"] == "minute"
    assert len(body["lines"][0]["points"]) == 61  # an hour of minutes, this one included
    lines = by(body["lines"])
    assert sum(lines[("turns", pilot)]) == 2
    assert sum(lines[("turns", skipper)]) == 1
    assert sum(lines[("cost_usd", pilot)]) > sum(lines[("cost_usd", skipper)]) > 0
    assert [v for v in lines[("latency.generate.p95", pilot)] if v is not None] != []
    assert ("errors", pilot) not in lines  # nothing failed: no line per agent

    total = (
        await world.http.get(
            "/metrics/series", params={"name": ["turns", "errors"], "group": "total", "step": "day"}
        )
    ).json()
    lines = by(total["lines"])
    assert lines[("turns", None)][-1] == 3
    assert lines[("errors", None)][-1] == 0
    assert len(lines[("turns", None)]) == 31


async def test_series_endpoint_agent_token_sees_its_agent_only(world: World) -> None:
    pilot = await world.agent(LIMITED)
    skipper = await world.agent({"name": "Skipper", "bio": ["sails"]})
    await world.say(pilot, "one")
    await world.say(skipper, "two")
    await world.flush()
    token = (await world.http.post("/tokens", json={"name": "p", "agent_id": pilot})).json()
    mine = bearer(token["token"])

    got = await world.http.get("/metrics/series", params={"name": "turns"}, headers=mine)
    assert [x["agent_id"] for x in got.json()["lines"]] == [pilot]
    other = await world.http.get(
        "/metrics/series", params={"name": "turns", "agent_id": skipper}, headers=mine
    )
    assert other.status_code == 403
    assert pilot in other.json()["message"]

    summary = (await world.http.get("/metrics/summary", headers=mine)).json()
    assert [a["agent_id"] for a in summary["agents"]] == [pilot]
    assert summary["total"]["turns"] == 1
    assert summary["global_budget"] is None


async def test_series_endpoint_checks_ranges_and_names(world: World) -> None:
    bad = [
        {"name": "turns", "from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
        {"name": "turns", "from": "2026-01-01T00:00:00Z", "to": "2026-01-10T00:00:00Z"},
        {"name": "Turns; drop"},
        {},
    ]
    for params in bad:
        got = await world.http.get("/metrics/series", params=params)
        assert got.status_code == 422, (params, got.text)
    too_long = await world.http.get("/metrics/series", params=bad[1])
    assert "step=day" in too_long.json()["message"]


async def test_series_summary_shows_budget_spent(world: World) -> None:
    pilot = await world.agent(LIMITED)
    await world.say(pilot, "a long question about the weather")
    await world.flush()
    summary = (await world.http.get("/metrics/summary")).json()
    [agent] = summary["agents"]
    assert agent["turns"] == 1
    assert agent["cost_usd"] > 0.001
    assert agent["budget"] == {
        "day_usd": 0.001,
        "month_usd": None,
        "policy": "warn",
        "fallback_model": None,
    }
    assert agent["exceeded"]["period"] == "day"
    assert "policy warn" in agent["exceeded"]["reason"]
    assert summary["total"]["cost_usd"] == agent["cost_usd"]


async def test_series_endpoint_unavailable_without_series(
    tmp_path: Path, series_factory: SeriesFactory
) -> None:
    env = {**series_factory.settings_env(), "CARRIER_ADMIN_TOKEN": ADMIN}
    settings = load_settings(env)
    async with SQLiteStore(path=tmp_path / "memory.db") as store:
        manager = AgentManager(store=store, embedder=HashEmbedder(), settings=settings, environ=env)
        app = create_app(manager, settings)
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost", headers=bearer(ADMIN)
        ) as http:
            got = await http.get("/metrics/series", params={"name": "turns"})
        await manager.close()
    assert got.status_code == 409
    assert "CARRIER_SERIES" in got.json()["message"]


async def test_series_invalid_budget_refused_by_the_api(world: World) -> None:
    data = {**LIMITED, "settings": {"budget": {"dailyUsd": 1, "policy": "fallback"}}}
    refused = await world.http.post("/agents", json=data)
    assert refused.status_code == 422
    [problem] = refused.json()["problems"]
    assert problem["path"] == "settings.budget"
    assert "fallbackModel" in problem["message"]
