"""``/agents/{id}/revisions``: the history of a character, diffs, reverts, and edits that refuse
to undo a newer one; secret references never shown; ``status`` is the desired state."""

from __future__ import annotations

from typing import Any

import httpx

from carrier.agents import AgentManager
from carrier.fleet.model import DesiredState
from tests.api.conftest import CHARACTER, bearer, create_running

SECRET_REFS = ("$PILOT_OPENAI_KEY", "$OTHER_OPENAI_KEY", "PILOT_OPENAI_KEY", "OTHER_OPENAI_KEY")


def edited(bio: str, **extra: Any) -> dict[str, Any]:
    return {**CHARACTER, "bio": [bio], **extra}


async def create(client: httpx.AsyncClient) -> str:
    created = await client.post("/agents", json=CHARACTER)
    assert created.status_code == 201, created.text
    agent_id: str = created.json()["id"]
    return agent_id


def no_secret_refs(response: httpx.Response) -> None:
    for ref in SECRET_REFS:
        assert ref not in response.text


async def test_revisions_put_records_source_api_and_the_token_name(
    client: httpx.AsyncClient, manager: AgentManager
) -> None:
    agent_id = await create(client)
    assert (await client.get(f"/agents/{agent_id}")).json()["revision"] == 1

    put = await client.put(f"/agents/{agent_id}", json=edited("Pilot flies gliders."))

    assert put.status_code == 200, put.text
    assert put.json()["revision"] == 2
    head = await manager.head(agent_id)
    assert (head.number, head.source.value, head.actor) == (2, "api", "admin")
    page = (await client.get(f"/agents/{agent_id}/revisions")).json()
    assert page["head"] == 2 and page["next_before"] is None
    assert [(r["number"], r["source"], r["actor"]) for r in page["items"]] == [
        (2, "api", "admin"),
        (1, "api", "admin"),
    ]
    assert "character" not in page["items"][0]

    console = {"X-Carrier-Client": "console"}
    again = await client.put(
        f"/agents/{agent_id}", json=edited("Pilot flies kites."), headers=console
    )
    assert again.status_code == 200, again.text
    head = await manager.head(agent_id)
    assert (head.number, head.source.value, head.actor) == (3, "console", "admin")


async def test_revisions_page_back_with_before_and_limit(client: httpx.AsyncClient) -> None:
    agent_id = await create(client)
    for n in range(2, 5):
        assert (await client.put(f"/agents/{agent_id}", json=edited(f"v{n}"))).status_code == 200

    first = (await client.get(f"/agents/{agent_id}/revisions", params={"limit": 3})).json()
    assert [r["number"] for r in first["items"]] == [4, 3, 2] and first["next_before"] == 2
    rest = (
        await client.get(f"/agents/{agent_id}/revisions", params={"limit": 3, "before": 2})
    ).json()
    assert [r["number"] for r in rest["items"]] == [1] and rest["next_before"] is None
    assert rest["head"] == 4


async def test_revisions_read_one_without_secret_references(client: httpx.AsyncClient) -> None:
    agent_id = await create(client)

    one = await client.get(f"/agents/{agent_id}/revisions/1")

    assert one.status_code == 200, one.text
    body = one.json()
    assert body["number"] == 1 and body["character"]["name"] == "Pilot"
    assert len(body["digest"]) == 64
    assert "secrets" not in body["character"].get("settings", {})
    no_secret_refs(one)
    missing = await client.get(f"/agents/{agent_id}/revisions/9")
    assert missing.status_code == 404 and missing.json()["error"] == "revision_not_found"
    assert "no revision 9" in missing.json()["message"]
    nobody = await client.get("/agents/nobody/revisions")
    assert nobody.status_code == 404 and nobody.json()["error"] == "agent_not_found"
    zero = await client.get(f"/agents/{agent_id}/revisions/0")
    assert zero.status_code == 422


async def test_revisions_diff_names_fields_and_masks_secret_references(
    client: httpx.AsyncClient,
) -> None:
    agent_id = await create(client)
    change = edited(
        "Pilot flies gliders.",
        settings={"secrets": {"OPENAI_API_KEY": "$OTHER_OPENAI_KEY"}},
        topics=["weather"],
    )
    assert (await client.put(f"/agents/{agent_id}", json=change)).status_code == 200

    diff = await client.get(f"/agents/{agent_id}/revisions/2/diff")

    assert diff.status_code == 200, diff.text
    body = diff.json()
    assert (body["from_revision"], body["to_revision"]) == (1, 2)
    changes = {c["path"]: c for c in body["changes"]}
    assert changes["bio[0]"] == {
        "path": "bio[0]",
        "kind": "changed",
        "old": "Pilot answers questions about flying.",
        "new": "Pilot flies gliders.",
        "secret": False,
    }
    assert changes["topics"]["kind"] == "added" and changes["topics"]["new"] == ["weather"]
    secret = changes["settings.secrets.OPENAI_API_KEY"]
    assert secret["secret"] is True and secret["kind"] == "changed"
    assert "--- revision 1\n+++ revision 2\n" in body["text"]
    assert "-  - Pilot answers questions about flying.\n" in body["text"]
    assert "+  - Pilot flies gliders.\n" in body["text"]
    assert "OPENAI_API_KEY: (secret reference, changed; not shown)" in body["text"]
    no_secret_refs(diff)

    first = (await client.get(f"/agents/{agent_id}/revisions/1/diff")).json()
    assert first["from_revision"] is None
    assert {c["kind"] for c in first["changes"]} == {"added"}
    backwards = (await client.get(f"/agents/{agent_id}/revisions/1/diff?against=2")).json()
    assert backwards["from_revision"] == 2
    assert {c["path"]: c["new"] for c in backwards["changes"]}["bio[0]"] == (
        "Pilot answers questions about flying."
    )
    same = (await client.get(f"/agents/{agent_id}/revisions/2/diff?against=2")).json()
    assert same["changes"] == [] and same["text"] == ""
    missing = await client.get(f"/agents/{agent_id}/revisions/2/diff?against=7")
    assert missing.status_code == 404 and "no revision 7" in missing.json()["message"]


async def test_revisions_put_with_a_stale_revision_is_refused_naming_both(
    client: httpx.AsyncClient, manager: AgentManager
) -> None:
    agent_id = await create(client)
    assert (await client.put(f"/agents/{agent_id}", json=edited("second"))).status_code == 200

    stale = await client.put(f"/agents/{agent_id}?revision=1", json=edited("from a stale read"))

    assert stale.status_code == 409
    body = stale.json()
    assert body["error"] == "revision_conflict"
    assert "revision 2" in body["message"] and "not 1" in body["message"]
    assert body["problems"] == [
        {
            "path": "query.revision",
            "message": "expected revision 1; the head is revision 2",
            "file": None,
        }
    ]
    assert (await manager.head(agent_id)).number == 2
    assert (await manager.get(agent_id)).character["bio"] == ["second"]

    fresh = await client.put(f"/agents/{agent_id}?revision=2", json=edited("third"))
    assert fresh.status_code == 200 and fresh.json()["revision"] == 3
    bad = await client.put(f"/agents/{agent_id}?revision=zero", json=edited("x"))
    assert bad.status_code == 422


async def test_revisions_revert_brings_a_character_back_to_the_running_agent(
    client: httpx.AsyncClient, manager: AgentManager
) -> None:
    agent_id = await create_running(client)
    runtime = manager.runtime(agent_id)
    assert (await client.put(f"/agents/{agent_id}", json=edited("Pilot sails."))).status_code == 200
    assert runtime.character.bio == ["Pilot sails."]

    reverted = await client.post(f"/agents/{agent_id}/revisions/1/revert")

    assert reverted.status_code == 200, reverted.text
    assert reverted.json()["revision"] == 3 and reverted.json()["running"] is True
    assert manager.runtime(agent_id) is runtime
    assert runtime.character.bio == ["Pilot answers questions about flying."]
    head = await manager.head(agent_id)
    assert (head.source.value, head.actor, head.note) == ("revert", "admin", "revert to revision 1")
    assert head.digest == (await manager.revision(agent_id, 1)).digest
    stored = (await manager.get(agent_id)).character
    assert stored["settings"]["secrets"] == {"OPENAI_API_KEY": "$PILOT_OPENAI_KEY"}

    again = await client.post(f"/agents/{agent_id}/revisions/1/revert")
    assert again.status_code == 200 and again.json()["revision"] == 3  # the head holds it already
    missing = await client.post(f"/agents/{agent_id}/revisions/8/revert")
    assert missing.status_code == 404 and missing.json()["error"] == "revision_not_found"


async def test_revisions_agent_tokens_read_their_own_agent_and_never_revert(
    client: httpx.AsyncClient,
) -> None:
    agent_id = await create(client)
    other = await client.post("/agents", json={**CHARACTER, "name": "Other"})
    other_id = other.json()["id"]
    made = await client.post("/tokens", json={"name": "pilot-bot", "agent_id": agent_id})
    token = bearer(made.json()["token"])

    own = await client.get(f"/agents/{agent_id}/revisions", headers=token)
    assert own.status_code == 200 and own.json()["head"] == 1
    assert (await client.get(f"/agents/{agent_id}/revisions/1/diff", headers=token)).is_success
    foreign = await client.get(f"/agents/{other_id}/revisions", headers=token)
    assert foreign.status_code == 403
    revert = await client.post(f"/agents/{agent_id}/revisions/1/revert", headers=token)
    assert revert.status_code == 403
    anonymous = await client.get(f"/agents/{agent_id}/revisions", headers={"Authorization": ""})
    assert anonymous.status_code == 401


async def test_agents_status_is_the_desired_state_wherever_the_agent_runs(
    client: httpx.AsyncClient, manager: AgentManager
) -> None:
    agent_id = await create(client)
    created = (await client.get(f"/agents/{agent_id}")).json()
    assert (created["status"], created["running"], created["desired_by"]) == (
        "stopped",
        False,
        None,
    )

    # Another process (a worker) was asked to run it: this one does not run it, and says so.
    fleet = await manager.fleet()
    await fleet.set_desired(agent_id, DesiredState.RUNNING, actor="cli:ops")
    elsewhere = (await client.get(f"/agents/{agent_id}")).json()
    assert (elsewhere["status"], elsewhere["running"], elsewhere["desired_by"]) == (
        "running",
        False,
        "cli:ops",
    )
    assert elsewhere["desired_at"] is not None

    started = (await client.post(f"/agents/{agent_id}/start")).json()
    assert (started["status"], started["running"], started["desired_by"]) == (
        "running",
        True,
        "admin",
    )
    stopped = (await client.post(f"/agents/{agent_id}/stop")).json()
    assert (stopped["status"], stopped["running"]) == ("stopped", False)
