"""POST /tools/{name}/test: a registered tool called once against a loopback tool server, its
output (or why it failed) shown, the header's secret never; admin only."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from carrier.agents import AgentManager
from carrier.api import ApiSettings, create_app
from carrier.settings import Settings
from tests.api.conftest import bearer, create_running
from tests.api.test_routes_tools import settings, tool_server, weather  # noqa: F401
from tests.pipeline.test_tools import ToolServer


async def test_a_tool_is_tested_with_its_output_or_its_failure(
    make_manager: Callable[..., AgentManager],
    settings: Settings,  # noqa: F811
    api_settings: ApiSettings,
    make_client: Callable[..., httpx.AsyncClient],
    tool_server: ToolServer,  # noqa: F811
) -> None:
    manager = make_manager(settings, environ={"WEATHER_KEY": "wk-secret-value-1"})
    app = create_app(manager, settings, api_settings=api_settings)
    try:
        async with make_client(app) as client:
            agent_id = await create_running(client)
            assert (await client.post("/tools", json=weather(tool_server.url))).status_code == 201
            ok = await client.post("/tools/get_weather/test", json={"city": "Oslo"})
            assert ok.status_code == 200, ok.text
            body = ok.json()
            assert body["ok"] is True and body["error"] is None
            assert '"forecast": "sunny, 21C"' in body["output"]
            assert tool_server.requests[-1]["key"] == "wk-secret-value-1"
            assert "wk-secret-value-1" not in ok.text

            wrong = (await client.post("/tools/get_weather/test", json={"town": "Oslo"})).json()
            assert wrong["ok"] is False and "city" in wrong["error"]

            failing = {**weather(tool_server.url), "name": "down", "url": f"{tool_server.url}/fail"}
            assert (await client.post("/tools", json=failing)).status_code == 201
            down = (await client.post("/tools/down/test", json={"city": "Oslo"})).json()
            assert down["ok"] is False and "503" in down["error"]

            missing = await client.post("/tools/nothing/test", json={})
            assert missing.status_code == 404 and "register" in missing.json()["message"]

            made = await client.post("/tokens", json={"name": "tt", "agent_id": agent_id})
            narrowed = bearer(made.json()["token"])
            refused = await client.post("/tools/get_weather/test", json={}, headers=narrowed)
            assert refused.status_code == 403
    finally:
        await manager.close()
