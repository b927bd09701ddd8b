"""Messages (JSON, multipart, SSE), media uploads, memories and forgetting a person."""

from __future__ import annotations

import json
from typing import Any

import httpx

from carrier.agents import AgentManager
from carrier.settings import Settings
from carrier.types import MemoryKind, MemoryStatus, stable_id
from tests.api.conftest import create_running


def sse_events(text: str) -> list[tuple[str, str]]:
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((fields["event"], fields["data"]))
    return events


async def test_message_json_reply_maps_user_and_room(
    client: httpx.AsyncClient, manager: AgentManager
) -> None:
    agent_id = await create_running(client)
    response = await client.post(
        f"/{agent_id}/message", json={"text": "hello there", "user_id": "ana", "user_name": "Ana"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["reply"] == "Ahoy! You said: hello there"
    assert [r["text"] for r in body["replies"]] == [body["reply"]]
    assert body["status"] == "processed" and body["offline"] is False
    assert body["thought"] is None
    assert body["usage"]["calls"] >= 1
    inbound = await manager.store.get_memory(body["message_id"])
    assert inbound is not None
    assert inbound.room_id == stable_id(agent_id, "api", "room", "api:ana")
    room = await manager.store.get_room(inbound.room_id)
    assert room is not None and room.platform_id == "api:ana" and room.kind == "api"


async def test_message_thought_only_for_admin_on_request(client: httpx.AsyncClient) -> None:
    agent_id = await create_running(client)
    response = await client.post(f"/{agent_id}/message?include_thought=true", json={"text": "why?"})
    assert response.json()["thought"] == "a private thought"
    token = (await client.post("/tokens", json={"name": "bot", "agent_id": agent_id})).json()
    scoped = await client.post(
        f"/{agent_id}/message?include_thought=true",
        json={"text": "why?"},
        headers={"Authorization": f"Bearer {token['token']}"},
    )
    assert scoped.status_code == 403 and "admin" in scoped.json()["message"]


async def test_message_validation_names_the_field(client: httpx.AsyncClient) -> None:
    agent_id = await create_running(client)
    response = await client.post(f"/{agent_id}/message", json={"text": 5, "colour": "red"})
    assert response.status_code == 422
    assert {p["path"] for p in response.json()["problems"]} == {"body.text", "body.colour"}
    response = await client.post(
        f"/{agent_id}/message", content=b"{", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422 and response.json()["error"] == "invalid_json"
    response = await client.post(f"/{agent_id}/message", content=b"hi")
    assert response.status_code == 415


async def test_message_multipart_with_text_file(
    client: httpx.AsyncClient, manager: AgentManager, settings: Settings
) -> None:
    agent_id = await create_running(client)
    response = await client.post(
        f"/{agent_id}/message",
        data={"text": "see the notes", "user_id": "ana"},
        files={"file": ("../../notes.txt", b"jam starts friday", "text/plain")},
    )
    assert response.status_code == 200, response.text
    inbound = await manager.store.get_memory(response.json()["message_id"])
    assert inbound is not None
    [attachment] = inbound.content.attachments
    assert attachment.title == "notes.txt" and attachment.size == 17
    assert attachment.text == "jam starts friday" and attachment.content_type == "text/plain"
    assert attachment.path is not None
    assert attachment.path.startswith(str(settings.data_dir / "uploads" / agent_id))


async def test_message_streams_server_sent_events(client: httpx.AsyncClient) -> None:
    agent_id = await create_running(client)
    response = await client.post(
        f"/{agent_id}/message",
        json={"text": "stream please"},
        headers={"Accept": "text/event-stream"},
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    assert [e for e, _ in events[:-1]] == ["chunk"] * (len(events) - 1)
    assert len(events) > 2
    streamed = "".join(json.loads(data) for _, data in events[:-1])
    event, data = events[-1]
    assert event == "done"
    assert json.loads(data)["reply"] == streamed == "Ahoy! You said: stream please"


async def test_message_model_failure_is_an_apology_and_a_failed_turn(
    make_manager, settings, api_settings, make_client
) -> None:
    from carrier.api import create_app
    from carrier.errors import ProviderError
    from carrier.llm.failures import FAILURE_NOTICE
    from carrier.llm.fake import FunctionModel

    def fail(request: Any) -> str:
        raise ProviderError("upstream timed out")

    manager = make_manager(settings, model_factory=lambda c: FunctionModel(fail))
    async with make_client(create_app(manager, settings, api_settings=api_settings)) as client:
        agent_id = await create_running(client)
        response = await client.post(
            f"/{agent_id}/message", json={"text": "x"}, headers={"Accept": "text/event-stream"}
        )
        # The person reads an apology, the operator the reason: error, then done.
        (error, notice), (done, body) = sse_events(response.text)
        assert (error, done) == ("error", "done")
        assert json.loads(notice) == {
            "error": "model_unavailable",
            "message": FAILURE_NOTICE,
            "problems": [],
        }
        assert json.loads(body)["status"] == "failed"
        assert json.loads(body)["reason"] == "upstream timed out"
        plain = await client.post(f"/{agent_id}/message", json={"text": "x"})
        assert plain.status_code == 503 and plain.json()["error"] == "model_unavailable"
        assert plain.json()["message"] == FAILURE_NOTICE and "Retry-After" not in plain.headers
        metrics = (await client.get("/metrics")).text
        assert 'carrier_errors_total{source="turn"} 2' in metrics
    await manager.close()


async def test_media_upload_waits_for_a_listed_publisher_and_409_without_one(
    client: httpx.AsyncClient, manager: AgentManager, settings: Settings
) -> None:
    plain = (await client.post("/agents", json={"name": "Plain"})).json()["id"]
    refused = await client.post(
        f"/{plain}/media", files={"file": ("shot.png", b"\x89PNG fake image", "image/png")}
    )
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"] == "no_publisher" and "not kept" in refused.json()["message"]
    assert not (settings.data_dir / "media" / plain).exists()

    poster = {"name": "Poster", "clients": ["instagram"]}
    agent_id = (await client.post("/agents", json=poster)).json()["id"]
    response = await client.post(
        f"/{agent_id}/media",
        data={"caption": "Jam results!", "publish_at": "2026-05-01T09:30:00+02:00"},
        files={"file": ("../shot.PNG", b"\x89PNG fake image", "image/png")},
    )
    assert response.status_code == 202, response.text
    media = response.json()
    assert media["status"] == "received" and "instagram client queues it" in media["message"]
    assert media["file_name"] == "shot.PNG" and media["size"] == 15
    assert media["publish_at"] == "2026-05-01T09:30:00+02:00"
    stored = list((settings.data_dir / "media" / agent_id).iterdir())
    assert [p.name for p in stored] == [f"{media['id']}.png"]
    memory = await manager.store.get_memory(media["id"])
    assert memory is not None and memory.kind == MemoryKind.POST
    assert memory.status == MemoryStatus.RECEIVED and memory.content.text == "Jam results!"

    bad = await client.post(
        f"/{agent_id}/media",
        data={"publish_at": "next tuesday"},
        files={"file": ("a.png", b"x", "image/png")},
    )
    assert bad.status_code == 422 and bad.json()["problems"][0]["path"] == "publish_at"
    text = await client.post(f"/{agent_id}/media", files={"file": ("a.txt", b"x", "text/plain")})
    assert text.status_code == 422 and "image or a video" in text.json()["message"]


async def test_memories_search_filter_paginate_and_forget(
    client: httpx.AsyncClient, manager: AgentManager
) -> None:
    agent_id = await create_running(client)
    for text in ("the jam starts friday", "pixel art tips", "my cat is orange"):
        await client.post(f"/{agent_id}/message", json={"text": text, "user_id": "ana"})
    await client.post(f"/{agent_id}/message", json={"text": "hello", "user_id": "bob"})

    page = (await client.get(f"/agents/{agent_id}/memories", params={"limit": 3})).json()
    assert len(page["items"]) == 3 and page["next_before"] is not None
    rest = (
        await client.get(
            f"/agents/{agent_id}/memories", params={"limit": 200, "before": page["next_before"]}
        )
    ).json()
    assert len(page["items"]) + len(rest["items"]) == 8 and rest["next_before"] is None
    by_offset = (
        await client.get(f"/agents/{agent_id}/memories", params={"limit": 3, "offset": 3})
    ).json()
    assert [m["id"] for m in by_offset["items"]] == [m["id"] for m in rest["items"][:3]]

    found = (await client.get(f"/agents/{agent_id}/memories", params={"q": "cat orange"})).json()
    assert "cat is orange" in found["items"][0]["text"] and found["items"][0]["score"] > 0
    room = stable_id(agent_id, "api", "room", "api:bob")
    bobs = (await client.get(f"/agents/{agent_id}/memories", params={"room_id": room})).json()
    assert len(bobs["items"]) == 2
    bad = await client.get(f"/agents/{agent_id}/memories", params={"limit": 500, "kind": "x"})
    assert bad.status_code == 422
    assert {p["path"] for p in bad.json()["problems"]} == {"query.limit", "query.kind"}

    ana = stable_id(agent_id, "api", "entity", "ana")
    forgot = await client.delete(f"/agents/{agent_id}/entities/{ana}/memories")
    assert forgot.status_code == 200
    assert forgot.json() == {
        "entity_id": ana,
        "deleted": 6,
        "messages": 3,
        "facts": 0,
        "replies": 3,
        "summaries": 0,
        "other": 0,
        "entity_record": True,  # her names and platform id went too
    }
    by_platform = await client.delete(
        f"/agents/{agent_id}/entities/bob/memories", params={"platform": "api"}
    )
    assert by_platform.json()["deleted"] == 2
    left = (await client.get(f"/agents/{agent_id}/memories", params={"q": "cat"})).json()
    assert all("cat" not in m["text"] for m in left["items"])
