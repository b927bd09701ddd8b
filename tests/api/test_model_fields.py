"""What the API says about an agent's model: the name only (``offline`` for the offline
provider) in ``model``, the reason beside it in ``model_note``; and a port uvicorn cannot bind
ends in one clear error, not uvicorn's ``SystemExit``."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from carrier.agents import AgentManager
from carrier.api import ApiSettings, create_app
from carrier.api.server import running_app
from carrier.errors import ConfigError
from carrier.settings import Settings
from tests.api.conftest import CHARACTER, create_running


@pytest.mark.parametrize(
    ("character", "note"),
    [
        (CHARACTER, "no model is configured"),
        (
            {**CHARACTER, "settings": {**CHARACTER["settings"], "model": "openai/gpt-4o-mini"}},
            "asks for openai/gpt-4o-mini, but OPENAI_API_KEY is not set",
        ),
    ],
)
async def test_model_fields_of_an_offline_agent_say_offline_and_why(
    character: dict[str, Any],
    note: str,
    make_manager: Callable[..., AgentManager],
    settings: Settings,
    api_settings: ApiSettings,
    make_client: Callable[..., httpx.AsyncClient],
) -> None:
    manager = make_manager(settings, model_factory=None)  # the model is chosen as in production
    app = create_app(manager, settings, api_settings=api_settings)
    try:
        async with make_client(app) as client:
            agent_id = await create_running(client, character)
            health = (await client.get("/health")).json()
            listed = (await client.get("/agents")).json()
            one = (await client.get(f"/agents/{agent_id}")).json()
    finally:
        await manager.close()

    assert [(a["model"], a["model_note"], a["offline"]) for a in health["agents"]] == [
        ("offline", note, True)
    ]
    assert [(a["model"], a["model_note"], a["offline"]) for a in listed] == [
        ("offline", note, True)
    ]
    assert (one["model"], one["model_note"]) == ("offline", note)


async def test_model_fields_of_a_stopped_agent_are_empty(client: httpx.AsyncClient) -> None:
    agent_id = await create_running(client)
    stopped = (await client.post(f"/agents/{agent_id}/stop")).json()
    assert (stopped["model"], stopped["model_note"], stopped["offline"]) == (None, None, None)


async def test_running_app_on_a_taken_port_raises_a_config_error_naming_another_port() -> None:
    # The race `carrier run` cannot rule out: the port was free when checked, then taken.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = int(held.getsockname()[1])
        with pytest.raises(ConfigError) as caught:
            async with running_app(FastAPI(), host="127.0.0.1", port=port):
                pytest.fail("the server started on a taken port")
    assert str(caught.value) == (
        f"port {port} on 127.0.0.1 is in use (another carrier, or another server); "
        f"stop it or try --port {port + 1}"
    )
