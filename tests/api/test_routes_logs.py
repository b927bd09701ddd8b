"""/agents/{id}/logs and /logs/stream: a turn whose model fails logs a line naming the agent;
it reaches the agent's tail (over a real loopback server, as the console follows it) with the
key the provider quoted redacted, the level filter keeps it out at WARNING, and another agent's
token is refused."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from carrier.agents import AgentManager
from carrier.api import ApiSettings, create_app
from carrier.api.server import running_app
from carrier.errors import ProviderError
from carrier.llm.base import ModelRequest
from carrier.llm.fake import FunctionModel
from carrier.logtail import LogTail, tail_agent_logs
from carrier.safety.redact import MARKER, Redactor, using_redactor
from carrier.settings import Settings
from tests.api.conftest import ADMIN, CHARACTER, answer, bearer, create_running

SECRET = "sk-proj-" + "Zx8Cv7Bn6Mm5Lk4Jh3Gf2Dd1" * 2


def failing(request: ModelRequest) -> str:
    if request.purpose == "response" and "fail" in (request.query or ""):
        raise ProviderError(f"401 from the provider: invalid key {SECRET}")
    return answer(request)


@pytest.fixture
def model() -> FunctionModel:
    return FunctionModel(failing)


@pytest.fixture
async def served(
    make_manager: Callable[..., AgentManager], settings: Settings, api_settings: ApiSettings
) -> AsyncIterator[tuple[str, AgentManager]]:
    manager = make_manager(settings)
    untail = tail_agent_logs(manager)
    app = create_app(manager, settings, api_settings=api_settings)
    try:
        async with running_app(app) as url:
            yield url, manager
    finally:
        untail()
        await manager.close()


@pytest.fixture(autouse=True)
def redactor(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.INFO, logger="carrier")  # as `carrier serve` logs by default
    with using_redactor(Redactor()):
        yield


FAILED = f"{CHARACTER['name']}: no answer from the model"


async def _until(client: httpx.AsyncClient, path: str, text: str) -> list[dict[str, Any]]:
    """The lines of the stream at ``path`` up to the first whose message starts with ``text``."""
    out: list[dict[str, Any]] = []
    async with client.stream("GET", path) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        async for raw in response.aiter_lines():
            if raw.startswith("data: "):
                out.append(json.loads(raw[6:]))
                if out[-1]["message"].startswith(text):
                    return out
    return out


async def test_a_failed_turn_reaches_the_tail_redacted(
    served: tuple[str, AgentManager],
) -> None:
    url, manager = served
    async with httpx.AsyncClient(base_url=url, headers=bearer(ADMIN), timeout=10) as client:
        agent_id = await create_running(client)
        assert isinstance(manager.services["logs"], LogTail)
        following = asyncio.create_task(
            _until(client, f"/agents/{agent_id}/logs/stream?level=INFO", FAILED)
        )
        said = await client.post(
            f"/{agent_id}/message", json={"text": "please fail", "user_id": "u1", "room_id": "r1"}
        )
        assert said.status_code in (200, 502, 503), said.text
        *before, line = await asyncio.wait_for(following, 10)
        assert [x["message"] for x in before] == [f"started Pilot ({agent_id}): function"]
        assert line["agent_id"] == agent_id and line["level"] == "INFO"
        assert SECRET not in line["message"] and MARKER in line["message"]

        kept = (await client.get(f"/agents/{agent_id}/logs")).json()
        assert [x["seq"] for x in kept] == [*(x["seq"] for x in before), line["seq"]]
        assert (await client.get(f"/agents/{agent_id}/logs?level=WARNING")).json() == []
        later = await client.get(f"/agents/{agent_id}/logs?after={line['seq']}")
        assert later.json() == []
        bad = await client.get(f"/agents/{agent_id}/logs?level=LOUD")
        assert bad.status_code == 422


async def test_an_agent_token_follows_its_own_agent_only(
    served: tuple[str, AgentManager],
) -> None:
    url, _ = served
    async with httpx.AsyncClient(base_url=url, headers=bearer(ADMIN), timeout=10) as client:
        mine = await create_running(client)
        other = await create_running(client, {**CHARACTER, "name": "Other"})
        token = (await client.post("/tokens", json={"name": "lg", "agent_id": mine})).json()
        narrowed = bearer(token["token"])
        await client.post(
            f"/{mine}/message", json={"text": "fail now", "user_id": "u1", "room_id": "r1"}
        )
        async with httpx.AsyncClient(base_url=url, headers=narrowed, timeout=10) as own:
            lines = await asyncio.wait_for(_until(own, f"/agents/{mine}/logs/stream", FAILED), 10)
        assert {x["agent_id"] for x in lines} == {mine}
        refused = await client.get(f"/agents/{other}/logs/stream", headers=narrowed)
        assert refused.status_code == 403


async def test_without_a_tail_the_server_says_who_keeps_one(
    client: httpx.AsyncClient,
) -> None:
    agent_id = await create_running(client)
    answer_ = await client.get(f"/agents/{agent_id}/logs")
    assert answer_.status_code == 409
    assert "carrier serve" in answer_.json()["message"]
