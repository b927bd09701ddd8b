"""/tools: a tool registered over the API (served by a loopback HTTP server) is called by the model
and its result reaches the reply. The operator lets tools reach 127.0.0.1 and send WEATHER_KEY
there (``settings`` below); the rules themselves are tested in ``tests/security/test_tools.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from carrier.agents import AgentManager
from carrier.api import ApiSettings, create_app
from carrier.llm.base import ModelRequest, ModelResult
from carrier.llm.fake import FunctionModel
from carrier.settings import Settings, load_settings
from tests.api.conftest import ADMIN, create_running, xml
from tests.pipeline.test_tools import ToolServer


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(
        {
            "CARRIER_DATA_DIR": str(tmp_path / "data"),
            "CARRIER_ADMIN_TOKEN": ADMIN,
            "CARRIER_TOOL_ENV": "WEATHER_KEY@127.0.0.1",
            "CARRIER_TOOL_INTERNAL_HOSTS": "127.0.0.1",
        }
    )


@pytest.fixture
def tool_server() -> Iterator[ToolServer]:
    server = ToolServer()
    server.thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def weather(base: str) -> dict[str, Any]:
    return {
        "name": "get_weather",
        "description": "The weather forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
        "url": f"{base}/weather",
        "method": "GET",
        "headers": {"X-Api-Key": "$WEATHER_KEY"},
        "timeout_s": 5,
    }


def tool_model(request: ModelRequest) -> str | ModelResult:
    outputs = [m for m in request.messages if m.role == "tool"]
    if outputs:
        return xml("The forecast says: " + str(outputs[0].content).split("\n")[1].strip())
    if request.tools:
        return ModelResult(
            text="",
            model="fake",
            tool_calls=[{"id": "t1", "name": "get_weather", "arguments": {"city": "Oslo"}}],
        )
    return xml("I have no tools.")


async def test_tools_registered_tool_reaches_the_reply(
    make_manager: Callable[..., AgentManager],
    settings: Settings,
    api_settings: ApiSettings,
    make_client: Callable[..., httpx.AsyncClient],
    tool_server: ToolServer,
) -> None:
    model = FunctionModel(tool_model)
    manager = make_manager(settings, model_factory=lambda c: model, environ={"WEATHER_KEY": "wk-1"})
    app = create_app(manager, settings, api_settings=api_settings)
    try:
        async with make_client(app) as client:
            agent_id = await create_running(client)
            before = await client.post(f"/{agent_id}/message", json={"text": "weather in Oslo?"})
            assert before.json()["reply"] == "I have no tools."

            created = await client.post("/tools", json=weather(tool_server.url))
            assert created.status_code == 201, created.text
            assert (await client.post("/tools", json=weather(tool_server.url))).status_code == 409
            listed = (await client.get("/tools")).json()
            assert [t["name"] for t in listed] == ["get_weather"]
            assert listed[0]["headers"] == {
                "X-Api-Key": "$WEATHER_KEY"
            }  # the reference, never the value

            reply = await client.post(f"/{agent_id}/message", json={"text": "weather in Oslo?"})
            assert reply.status_code == 200, reply.text
            assert (
                reply.json()["reply"]
                == 'The forecast says: {"city": "Oslo", "forecast": "sunny, 21C"}'
            )
            assert tool_server.requests[-1]["key"] == "wk-1"
            assert "wk-1" not in reply.text

            assert (await client.delete("/tools/get_weather")).status_code == 204
            assert (await client.delete("/tools/get_weather")).status_code == 404
            after = await client.post(f"/{agent_id}/message", json={"text": "weather in Oslo?"})
            assert after.json()["reply"] == "I have no tools."
    finally:
        await manager.close()


async def test_tools_bad_spec_names_the_field(client: httpx.AsyncClient) -> None:
    bad = {
        "name": "leaky",
        "description": "d",
        "url": "http://127.0.0.1/x",
        "headers": {"Authorization": "Bearer abc"},
    }
    response = await client.post("/tools", json=bad)
    assert response.status_code == 422
    body = response.json()
    assert any("headers" in p["path"] for p in body["problems"]), body
    assert "Bearer abc" not in response.text


async def test_tools_require_admin(
    client: httpx.AsyncClient, make_client, manager, settings, api_settings
) -> None:  # type: ignore[no-untyped-def]
    app = create_app(manager, settings, api_settings=api_settings)
    async with make_client(app, token=None) as anonymous:
        assert (await anonymous.get("/tools")).status_code == 401
        assert (await anonymous.post("/tools", json={})).status_code == 401
