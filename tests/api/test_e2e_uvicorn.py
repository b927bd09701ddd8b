"""End to end on a real uvicorn on loopback: create Harbor from its file, start it, talk to it
(plain and streaming), search its memories, stop it, delete it."""

from __future__ import annotations

import json

import httpx

from carrier.agents import AgentManager
from carrier.api import ApiSettings, api_server
from carrier.settings import Settings
from tests.api.conftest import ADMIN, HARBOR, bearer


async def test_e2e_harbor_lifecycle_over_real_uvicorn(
    manager: AgentManager, settings: Settings, api_settings: ApiSettings
) -> None:
    async with (
        api_server(manager, settings, host="127.0.0.1", port=0, api_settings=api_settings) as url,
        httpx.AsyncClient(base_url=url, headers=bearer(ADMIN), timeout=10) as http,
    ):
        assert (await http.get("/health")).json()["status"] == "ok"
        files = {"file": ("harbor.yaml", HARBOR.read_bytes(), "application/yaml")}
        created = await http.post("/agents", files=files)
        assert created.status_code == 201, created.text
        agent_id = created.json()["id"]

        started = await http.post(f"/agents/{agent_id}/start")
        assert started.json()["running"] is True
        assert "discord" in started.json()["skipped_clients"]

        plain = await http.post(
            f"/{agent_id}/message", json={"text": "when is the next game jam?", "user_id": "ana"}
        )
        assert plain.status_code == 200
        assert plain.json()["reply"] == "Ahoy! You said: when is the next game jam?"

        chunks: list[str] = []
        done: dict[str, object] = {}
        async with http.stream(
            "POST",
            f"/{agent_id}/message",
            json={"text": "where do I post my game?", "user_id": "ana"},
            headers={"Accept": "text/event-stream"},
        ) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            event = ""
            async for line in stream.aiter_lines():
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    data = json.loads(line.removeprefix("data: "))
                    if event == "chunk":
                        chunks.append(data)
                    elif event == "done":
                        done = data
        assert len(chunks) > 1
        assert "".join(chunks) == done["reply"] == "Ahoy! You said: where do I post my game?"

        found = await http.get(f"/agents/{agent_id}/memories", params={"q": "game jam"})
        assert found.status_code == 200
        assert "game jam" in found.json()["items"][0]["text"]

        assert (await http.post(f"/agents/{agent_id}/stop")).json()["running"] is False
        assert (await http.delete(f"/agents/{agent_id}")).status_code == 204
        assert (await http.get(f"/agents/{agent_id}")).status_code == 404
        assert (await http.get("/agents")).json() == []
