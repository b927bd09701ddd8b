"""Client configuration, tokens, health and metrics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from carrier.agents import AgentManager
from carrier.api import create_app
from carrier.settings import Settings
from tests.api.conftest import bearer, create_running
from tests.api.test_agent_manager import FakeFactory


async def test_clients_config_validated_stored_pushed_and_masked(
    make_manager: Callable[..., AgentManager],
    settings: Settings,
    api_settings: Any,
    make_client: Callable[..., httpx.AsyncClient],
) -> None:
    factory = FakeFactory()
    manager = make_manager(settings, client_factories={"fake": factory})
    async with make_client(create_app(manager, settings, api_settings=api_settings)) as client:
        agent_id = await create_running(client, {"name": "Pilot", "clients": ["fake"]})
        assert factory.made[0].started

        bad = await client.post("/clients/fake/config", json={"greeting": 3})
        assert bad.status_code == 422
        assert bad.json()["problems"][0]["path"] == "greeting"

        ok = await client.post(f"/clients/{agent_id}:fake/config", json={"greeting": "ahoy"})
        assert ok.status_code == 200, ok.text
        assert ok.json() == {
            "client_id": f"{agent_id}:fake",
            "config": {"greeting": "ahoy"},
            "validated": True,
            "applied_to": [agent_id],
        }
        assert factory.made[0].config == {"greeting": "ahoy"}

        other = await client.post("/clients/other/config", json={"apiToken": "$OTHER_TOKEN"})
        assert other.json()["config"] == {"apiToken": "set"} and not other.json()["validated"]
        assert "$OTHER_TOKEN" not in other.text
        assert (await client.get("/clients/other/config")).json()["config"] == {"apiToken": "set"}
        literal = await client.post("/clients/other/config", json={"apiToken": "abcd1234efgh5678"})
        assert literal.status_code == 422 and literal.json()["problems"][0]["path"] == "apiToken"
        assert (await client.get("/clients/nobody:fake/config")).status_code == 404
        assert (await client.post("/clients/fake/config", json=[1])).status_code == 422
    await manager.close()


async def test_tokens_created_once_listed_without_secret_and_deleted(
    client: httpx.AsyncClient, manager: AgentManager
) -> None:
    agent_id = (await client.post("/agents", json={"name": "Pilot"})).json()["id"]
    created = await client.post("/tokens", json={"name": "bot", "agent_id": agent_id})
    assert created.status_code == 201
    token = created.json()["token"]
    stored = await manager.store.get_setting("api_tokens")
    assert stored is not None
    assert token not in str(stored) and len(stored["bot"]["hash"]) == 64

    listed = (await client.get("/tokens")).json()
    assert listed == [{"name": "bot", "agent_id": agent_id, "created_at": listed[0]["created_at"]}]
    assert token not in (await client.get("/tokens")).text
    dup = await client.post("/tokens", json={"name": "bot", "agent_id": agent_id})
    assert dup.status_code == 409
    nobody = await client.post("/tokens", json={"name": "x", "agent_id": "nobody"})
    assert nobody.status_code == 404

    assert (await client.get(f"/agents/{agent_id}", headers=bearer(token))).status_code == 200
    assert (await client.delete("/tokens/bot")).status_code == 204
    assert (await client.get(f"/agents/{agent_id}", headers=bearer(token))).status_code == 401
    assert (await client.delete("/tokens/bot")).status_code == 404


async def test_tokens_of_a_deleted_agent_are_deleted(client: httpx.AsyncClient) -> None:
    agent_id = (await client.post("/agents", json={"name": "Pilot"})).json()["id"]
    await client.post("/tokens", json={"name": "bot", "agent_id": agent_id})
    await client.delete(f"/agents/{agent_id}")
    assert (await client.get("/tokens")).json() == []


async def test_health_public_summary_and_admin_details(
    client: httpx.AsyncClient, manager: AgentManager, settings: Settings, api_settings: Any
) -> None:
    await create_running(client)
    detailed = (await client.get("/health")).json()
    assert detailed["status"] == "ok" and detailed["store"] == "ok"
    assert [(a["name"], a["model"], a["offline"]) for a in detailed["agents"]] == [
        ("Pilot", "function", False)
    ]
    public = await client.get("/health", headers={"Authorization": ""})
    assert public.status_code == 200 and public.json()["agents"] is None

    await manager.store.close()
    down = await client.get("/health")
    assert down.status_code == 503 and down.json()["status"] == "degraded"
    await manager.store.open()


async def test_metrics_prometheus_text(client: httpx.AsyncClient) -> None:
    agent_id = await create_running(client)
    await client.post(f"/{agent_id}/message", json={"text": "one"})
    await client.post(
        f"/{agent_id}/message", json={"text": "two"}, headers={"Accept": "text/event-stream"}
    )
    response = await client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    assert f'carrier_turns_total{{agent="{agent_id}",status="processed"}} 2' in text
    assert 'carrier_turn_seconds_bucket{le="+Inf"} 2' in text
    assert "carrier_turn_seconds_count 2" in text
    assert 'carrier_tokens_total{kind="prompt"} 0' in text
    assert "carrier_cost_usd_total 0" in text
    assert "# TYPE carrier_turn_seconds histogram" in text
    assert 'carrier_turn_stage_seconds_count{stage="evaluate"} 2' in text
    # The agent's vectors, as the store's in-process index holds them: its messages and replies
    # in the main set, its (absent) knowledge in a set of its own.
    lines = [row for row in text.splitlines() if row.startswith("carrier_vector_rows{")]
    rows = {line.split('set="')[1].split('"')[0]: int(line.rsplit(" ", 1)[1]) for line in lines}
    assert all(f'agent="{agent_id}"' in line for line in lines)
    assert rows["main"] >= 2 and rows["knowledge"] == 0


async def test_app_mounts_extra_routers_and_hides_bugs_behind_a_generic_500(
    manager: AgentManager, settings: Settings, api_settings: Any
) -> None:
    from fastapi import APIRouter

    extra = APIRouter()

    @extra.get("/extra/broken")
    async def broken() -> dict[str, str]:
        raise RuntimeError("secret internals")

    app = create_app(manager, settings, api_settings=api_settings, routers=[extra])
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        response = await client.get("/extra/broken")
        assert response.status_code == 500
        assert response.json()["error"] == "internal_error"
        assert "secret internals" not in response.text
        missing = await client.get("/no/such/route")
        assert missing.status_code == 404 and missing.json()["error"] == "not_found"
        wrong = await client.patch("/agents")
        assert wrong.status_code == 405 and wrong.headers["allow"] == "GET, POST"
    metrics = app.state.api.metrics.render()
    assert 'carrier_errors_total{source="http"} 1' in metrics


async def test_platform_client_configs_are_checked_against_their_models(
    make_manager: Callable[..., AgentManager],
    settings: Settings,
    api_settings: Any,
    make_client: Callable[..., httpx.AsyncClient],
) -> None:
    from clients.discord import create_client as discord
    from clients.instagram import create_client as instagram

    manager = make_manager(settings, client_factories={"discord": discord, "instagram": instagram})
    async with make_client(create_app(manager, settings, api_settings=api_settings)) as client:
        bad = await client.post("/clients/discord/config", json={"allowedChannels": [{"id": 1}]})
        assert bad.status_code == 422, bad.text
        assert bad.json()["problems"][0]["path"] == "allowedChannels"
        assert (await client.get("/clients/discord/config")).json()["config"] == {}  # not stored

        # One channel id alone is a list of one (what the Discord model reads it as).
        ok = await client.post("/clients/discord/config", json={"allowedChannels": 5})
        assert (ok.status_code, ok.json()["validated"]) == (200, True)

        wrong = await client.post("/clients/instagram/config", json={"publisher": "fax"})
        assert wrong.status_code == 422 and wrong.json()["problems"][0]["path"] == "publisher"
        right = await client.post("/clients/instagram/config", json={"publisher": "instagrapi"})
        assert right.status_code == 200 and right.json()["validated"] is True
    await manager.close()
