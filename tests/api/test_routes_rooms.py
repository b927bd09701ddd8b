"""``GET /agents/{agent_id}/messages``: a conversation held through the API, read back."""

from __future__ import annotations

import httpx

from carrier.types import stable_id
from tests.api.conftest import CHARACTER, bearer, create_running


async def say(client: httpx.AsyncClient, agent_id: str, text: str, **names: str) -> None:
    response = await client.post(f"/{agent_id}/message", json={"text": text, **names})
    assert response.status_code == 200, response.text


async def test_rooms_conversation_both_sides_oldest_first(client: httpx.AsyncClient) -> None:
    agent_id = await create_running(client)
    room = {"room_id": "console:b1", "user_id": "console-b1", "user_name": "Ana"}
    await say(client, agent_id, "first", **room)
    await say(client, agent_id, "elsewhere", room_id="console:other")
    await say(client, agent_id, "second", **room)

    response = await client.get(f"/agents/{agent_id}/messages", params={"room_id": "console:b1"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["room_id"] == stable_id(agent_id, "api", "room", "console:b1")
    said = [(m["role"], m["speaker"], m["text"], m["status"]) for m in body["items"]]
    assert said == [
        ("user", "Ana", "first", "processed"),
        ("agent", "Pilot", "Ahoy! You said: first", "sent"),
        ("user", "Ana", "second", "processed"),
        ("agent", "Pilot", "Ahoy! You said: second", "sent"),
    ]
    items = body["items"]
    assert items[1]["in_reply_to"] == items[0]["id"] and items[0]["in_reply_to"] is None
    assert body["next_before"] is None
    # No private parts of a turn: the model's thought stays out.
    assert "a private thought" not in response.text


async def test_rooms_conversation_named_like_the_message_route(client: httpx.AsyncClient) -> None:
    """Without room_id the room is ``api:<user_id>``, else the caller's ``api:<token name>``."""
    agent_id = await create_running(client)
    await say(client, agent_id, "from ana", user_id="ana")
    await say(client, agent_id, "from the admin")

    ana = (await client.get(f"/agents/{agent_id}/messages", params={"user_id": "ana"})).json()
    assert [m["text"] for m in ana["items"] if m["role"] == "user"] == ["from ana"]
    mine = (await client.get(f"/agents/{agent_id}/messages")).json()
    assert [m["text"] for m in mine["items"] if m["role"] == "user"] == ["from the admin"]
    empty = await client.get(f"/agents/{agent_id}/messages", params={"room_id": "never-used"})
    assert empty.status_code == 200 and empty.json()["items"] == []


async def test_rooms_conversation_pages_back_with_before(client: httpx.AsyncClient) -> None:
    agent_id = await create_running(client)
    for n in range(3):
        await say(client, agent_id, f"m{n}", room_id="r")
    url = f"/agents/{agent_id}/messages"
    latest = (await client.get(url, params={"room_id": "r", "limit": 4})).json()
    assert [m["text"] for m in latest["items"]] == [
        "m1",
        "Ahoy! You said: m1",
        "m2",
        "Ahoy! You said: m2",
    ]
    assert latest["next_before"] is not None
    params = {"room_id": "r", "limit": 4, "before": latest["next_before"]}
    earlier = (await client.get(url, params=params)).json()
    assert [m["text"] for m in earlier["items"]] == ["m0", "Ahoy! You said: m0"]
    assert earlier["next_before"] is None


async def test_rooms_conversation_readable_while_stopped(client: httpx.AsyncClient) -> None:
    agent_id = await create_running(client)
    await say(client, agent_id, "before the stop", room_id="r")
    assert (await client.post(f"/agents/{agent_id}/stop")).status_code == 200
    body = (await client.get(f"/agents/{agent_id}/messages", params={"room_id": "r"})).json()
    assert [m["text"] for m in body["items"]] == [
        "before the stop",
        "Ahoy! You said: before the stop",
    ]


async def test_rooms_conversation_auth_like_memories(client: httpx.AsyncClient) -> None:
    agent_id = await create_running(client)
    other = (await client.post("/agents", json={**CHARACTER, "name": "Other"})).json()["id"]
    await say(client, agent_id, "hello", room_id="r")
    token = (await client.post("/tokens", json={"name": "t", "agent_id": agent_id})).json()
    scoped = bearer(token["token"])
    url = f"/agents/{agent_id}/messages"

    own = await client.get(url, params={"room_id": "r"}, headers=scoped)
    assert own.status_code == 200 and own.json()["items"][0]["text"] == "hello"
    elsewhere = await client.get(f"/agents/{other}/messages", headers=scoped)
    assert elsewhere.status_code == 403 and "scoped to agent" in elsewhere.json()["message"]
    anonymous = await client.get(url, headers={"Authorization": ""})
    assert anonymous.status_code == 401
    missing = await client.get("/agents/no-such-agent/messages")
    assert missing.status_code == 404
    bad = await client.get(url, params={"limit": 0, "before": "yesterday"})
    assert bad.status_code == 422
    assert {p["path"] for p in bad.json()["problems"]} >= {"query.limit", "query.before"}
