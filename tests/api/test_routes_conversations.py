"""An agent's conversations for an operator: its rooms and people, a room's turns with their
trace, memory search by meaning and by words, a person's facts and summaries, export and
forget. Through the app in process, on a real SQLite file."""

from __future__ import annotations

import json

import httpx

from carrier.agents import AgentManager
from carrier.memory.rights import entity_id_for
from carrier.types import Content, Memory, MemoryKind, stable_id
from tests.api.conftest import CHARACTER, bearer, create_running


async def say(client: httpx.AsyncClient, agent_id: str, text: str, **names: str) -> None:
    response = await client.post(f"/{agent_id}/message", json={"text": text, **names})
    assert response.status_code == 200, response.text


ANA = {"room_id": "harbor-chat", "user_id": "ana", "user_name": "Ana"}
BO = {"room_id": "quay", "user_id": "bo", "user_name": "Bo"}


async def test_conversations_rooms_newest_first_with_their_people(
    client: httpx.AsyncClient,
) -> None:
    agent_id = await create_running(client)
    other = await create_running(client, {**CHARACTER, "name": "Other"})
    await say(client, agent_id, "hello from ana", **ANA)
    await say(client, agent_id, "hello from bo", **BO)
    await say(client, other, "not this agent's", **ANA)

    body = (await client.get(f"/agents/{agent_id}/rooms")).json()
    rooms = body["items"]
    assert [r["platform_id"] for r in rooms] == ["quay", "harbor-chat"]
    assert rooms[0]["room_id"] == stable_id(agent_id, "api", "room", "quay")
    assert rooms[0]["platform"] == "api" and rooms[0]["messages"] == 2  # Bo's and the reply
    assert [(p["name"], p["platform_id"]) for p in rooms[0]["people"]] == [("Bo", "bo")]
    assert body["next_before"] is None

    # One room a page: the cursor reaches the older one.
    first = (await client.get(f"/agents/{agent_id}/rooms", params={"limit": 1})).json()
    assert [r["platform_id"] for r in first["items"]] == ["quay"]
    params = {"limit": 1, "before": first["next_before"]}
    second = (await client.get(f"/agents/{agent_id}/rooms", params=params)).json()
    assert [r["platform_id"] for r in second["items"]] == ["harbor-chat"]


async def test_conversations_history_shows_each_turns_trace(client: httpx.AsyncClient) -> None:
    agent_id = await create_running(client)
    await say(client, agent_id, "what is the tide?", **ANA)
    room = stable_id(agent_id, "api", "room", "harbor-chat")

    response = await client.get(f"/agents/{agent_id}/rooms/{room}/history")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["room"]["platform_id"] == "harbor-chat"
    assert [p["name"] for p in body["room"]["people"]] == ["Ana"]
    asked, reply = body["items"]
    assert (asked["role"], asked["speaker"], asked["status"]) == ("user", "Ana", "processed")
    assert asked["thought"] is None and asked["actions"] == []
    assert reply["role"] == "agent" and reply["in_reply_to"] == asked["id"]
    assert reply["thought"] == "a private thought"
    assert reply["actions"] == [{"action": "REPLY", "ok": True, "error": None}]
    assert {"message", "state", "generate", "actions"} <= set(reply["timings_ms"])
    assert reply["usage"]["calls"] == 1 and "cost_usd" in reply["usage"]
    assert reply["model"]

    missing = await client.get(f"/agents/{agent_id}/rooms/no-such-room/history")
    assert missing.status_code == 404
    assert f"GET /agents/{agent_id}/rooms" in missing.json()["message"]


async def test_conversations_search_by_meaning_and_by_words(client: httpx.AsyncClient) -> None:
    agent_id = await create_running(client)
    await say(client, agent_id, "the lighthouse keeper is called Zebulon", **ANA)
    await say(client, agent_id, "the weather is fine today", **BO)
    url = f"/agents/{agent_id}/memories"

    words = (await client.get(url, params={"q": "zebulon", "mode": "words"})).json()["items"]
    assert words and all("Zebulon" in m["text"] for m in words)
    assert any(m["kind"] == "message" and m["text"].startswith("the lighthouse") for m in words)
    # Paged: Ana's message and the reply that quotes it, one at a time.
    first = (await client.get(url, params={"q": "zebulon", "mode": "words", "limit": 1})).json()
    assert len(first["items"]) == 1 and first["next_offset"] == 1
    params = {"q": "zebulon", "mode": "words", "limit": 1, "offset": 1}
    second = (await client.get(url, params=params)).json()
    assert second["items"][0]["id"] != first["items"][0]["id"]
    nothing = (await client.get(url, params={"q": "xylophone", "mode": "words"})).json()
    assert nothing["items"] == []
    # By meaning, something always comes back, best first, with a cosine.
    meaning = (await client.get(url, params={"q": "weather", "mode": "meaning"})).json()
    assert meaning["items"] and meaning["items"][0]["score"] is not None
    bad = await client.get(url, params={"q": "x", "mode": "regex"})
    assert bad.status_code == 422


async def test_conversations_person_with_facts_and_summaries(
    client: httpx.AsyncClient, manager: AgentManager
) -> None:
    agent_id = await create_running(client)
    await say(client, agent_id, "I sail on Sundays", **ANA)
    await say(client, agent_id, "hi", **BO)
    ana = entity_id_for(agent_id, "api", "ana")
    room = stable_id(agent_id, "api", "room", "harbor-chat")
    store = manager.store
    await store.add_memory(
        Memory(
            agent_id=agent_id,
            room_id=room,
            entity_id=ana,
            kind=MemoryKind.FACT,
            content=Content(text="Ana sails on Sundays", source="facts"),
        )
    )
    await store.add_memory(
        Memory(
            agent_id=agent_id,
            room_id=room,
            entity_id=stable_id(agent_id, "agent"),
            kind=MemoryKind.SUMMARY,
            content=Content(text="Ana talked about sailing.", metadata={"entities": [ana]}),
        )
    )

    people = (await client.get(f"/agents/{agent_id}/people")).json()
    assert [(p["name"], p["platform_id"], p["messages"]) for p in people] == [
        ("Ana", "ana", 1),
        ("Bo", "bo", 1),
    ]
    assert people[0]["memories"] == 2  # her message and the fact
    found = (await client.get(f"/agents/{agent_id}/people", params={"q": "ana"})).json()
    assert [p["entity_id"] for p in found] == [ana]

    detail = (await client.get(f"/agents/{agent_id}/people/{ana}")).json()
    assert [f["text"] for f in detail["facts"]] == ["Ana sails on Sundays"]
    assert [s["text"] for s in detail["summaries"]] == ["Ana talked about sailing."]
    assert (await client.get(f"/agents/{agent_id}/people/nobody")).status_code == 404


async def test_conversations_export_then_forget_a_person(client: httpx.AsyncClient) -> None:
    agent_id = await create_running(client)
    await say(client, agent_id, "remember my boat", **ANA)
    await say(client, agent_id, "hi", **BO)
    ana = entity_id_for(agent_id, "api", "ana")

    export = await client.get(f"/agents/{agent_id}/memories/export")
    assert export.status_code == 200
    assert export.headers["content-type"].startswith("application/x-ndjson")
    assert "attachment;" in export.headers["content-disposition"]
    lines = [json.loads(line) for line in export.text.splitlines()]
    assert len(lines) == 4 and all("embedding" not in m for m in lines)
    hers = await client.get(f"/agents/{agent_id}/memories/export", params={"entity_id": ana})
    assert [json.loads(line)["content"]["text"] for line in hers.text.splitlines()] == [
        "remember my boat"
    ]

    gone = await client.delete(f"/agents/{agent_id}/entities/{ana}/memories")
    assert gone.status_code == 200
    assert gone.json()["messages"] == 1 and gone.json()["replies"] == 1
    people = (await client.get(f"/agents/{agent_id}/people")).json()
    assert [p["name"] for p in people] == ["Bo"]
    left = await client.get(f"/agents/{agent_id}/memories/export")
    assert "remember my boat" not in left.text and len(left.text.splitlines()) == 2


async def test_conversations_narrowed_to_an_agent_token(client: httpx.AsyncClient) -> None:
    agent_id = await create_running(client)
    other = await create_running(client, {**CHARACTER, "name": "Other"})
    await say(client, agent_id, "hello", **ANA)
    made = await client.post("/tokens", json={"name": "pilot-ops", "agent_id": agent_id})
    scoped = bearer(made.json()["token"])
    ana = entity_id_for(agent_id, "api", "ana")
    room = stable_id(agent_id, "api", "room", "harbor-chat")

    for path in ("rooms", f"rooms/{room}/history", "people", f"people/{ana}", "memories/export"):
        mine = await client.get(f"/agents/{agent_id}/{path}", headers=scoped)
        assert mine.status_code == 200, (path, mine.text)
        refused = await client.get(f"/agents/{other}/{path}", headers=scoped)
        assert refused.status_code == 403, path
    # The model's private thought is the admin's only (as include_thought on messages).
    history = f"/agents/{agent_id}/rooms/{room}/history"
    assert any(i["thought"] for i in (await client.get(history)).json()["items"])
    assert not any(
        i["thought"] for i in (await client.get(history, headers=scoped)).json()["items"]
    )
    # Forgetting a person stays the admin's.
    forget = await client.delete(f"/agents/{agent_id}/entities/{ana}/memories", headers=scoped)
    assert forget.status_code == 403
    assert "admin token" in forget.json()["message"]
