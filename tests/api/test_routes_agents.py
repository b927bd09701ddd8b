"""``/agents``: create from JSON, YAML or an upload; validation problems; secrets never shown."""

from __future__ import annotations

import json

import httpx

from carrier.agents import AgentManager
from tests.api.conftest import CHARACTER, HARBOR, create_running


async def test_agents_create_from_json_masks_secret_references(client: httpx.AsyncClient) -> None:
    response = await client.post("/agents", json=CHARACTER)
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["name"] == "Pilot" and body["status"] == "stopped" and body["running"] is False
    assert body["secrets"] == {"OPENAI_API_KEY": "unset"}
    assert "$PILOT_OPENAI_KEY" not in response.text
    assert "secrets" not in body["character"].get("settings", {})

    again = await client.post("/agents", json=CHARACTER)
    assert again.status_code == 409
    assert again.json()["error"] == "agent_exists"


async def test_agents_secret_status_follows_the_environment(
    make_manager, settings, api_settings, make_client
) -> None:
    from carrier.api import create_app

    manager = make_manager(settings, environ={"PILOT_OPENAI_KEY": "sk-real"})
    async with make_client(create_app(manager, settings, api_settings=api_settings)) as client:
        response = await client.post("/agents", json=CHARACTER)
    assert response.json()["secrets"] == {"OPENAI_API_KEY": "set"}
    assert "sk-real" not in response.text


async def test_agents_create_from_yaml_body(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/agents",
        content=HARBOR.read_bytes(),
        headers={"Content-Type": "application/yaml"},
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["name"] == "Harbor"
    assert set(body["secrets"]) == {"DISCORD_API_TOKEN", "DISCORD_APPLICATION_ID", "OPENAI_API_KEY"}
    assert "$DISCORD_API_TOKEN" not in response.text


async def test_agents_create_from_upload(client: httpx.AsyncClient) -> None:
    files = {"file": ("harbor.yaml", HARBOR.read_bytes(), "application/yaml")}
    response = await client.post("/agents", files=files)
    assert response.status_code == 201, response.text
    assert response.json()["name"] == "Harbor"


async def test_agents_invalid_upload_lists_every_problem_with_path_and_file(
    client: httpx.AsyncClient,
) -> None:
    bad = {
        "name": "",
        "bio": 5,
        "settings": {"secrets": {"OPENAI_API_KEY": "sk-pasted-literal-secret-123456"}},
    }
    files = {"file": ("bad.json", json.dumps(bad).encode(), "application/json")}
    response = await client.post("/agents", files=files)
    assert response.status_code == 422
    body = response.json()
    assert body["error"] == "invalid_character"
    paths = {p["path"] for p in body["problems"]}
    assert {"name", "bio", "settings.secrets.OPENAI_API_KEY"} <= paths
    assert {p["file"] for p in body["problems"]} == {"bad.json"}
    assert "sk-pasted" not in response.text


async def test_agents_syntax_error_and_wrong_content_type(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/agents", content=b"name: [unclosed", headers={"Content-Type": "application/yaml"}
    )
    assert response.status_code == 422
    assert "invalid YAML at line 1" in response.json()["problems"][0]["message"]
    response = await client.post("/agents", content=b"x", headers={"Content-Type": "text/csv"})
    assert response.status_code == 415
    assert "application/json" in response.json()["message"]
    response = await client.post("/agents", json=[1, 2])
    assert response.status_code == 422
    assert "expected an object" in response.json()["problems"][0]["message"]


async def test_agents_put_edits_running_agent_and_keeps_secret_refs(
    client: httpx.AsyncClient, manager: AgentManager
) -> None:
    agent_id = await create_running(client)
    runtime = manager.runtime(agent_id)
    shown = (await client.get(f"/agents/{agent_id}")).json()
    edited = {**shown["character"], "name": "Captain", "bio": ["Captain flies jets."]}

    response = await client.put(f"/agents/{agent_id}", json=edited)

    assert response.status_code == 200, response.text
    assert response.json()["name"] == "Captain" and response.json()["id"] == agent_id
    assert manager.runtime(agent_id) is runtime and runtime.character.name == "Captain"
    stored = (await manager.get(agent_id)).character
    assert stored["settings"]["secrets"] == {"OPENAI_API_KEY": "$PILOT_OPENAI_KEY"}
    wrong = await client.put(f"/agents/{agent_id}", json={**edited, "id": "someone-else"})
    assert wrong.status_code == 422 and "does not match" in wrong.json()["message"]


async def test_agents_list_start_stop_delete(client: httpx.AsyncClient) -> None:
    agent_id = await create_running(client)
    listed = (await client.get("/agents")).json()
    assert [(a["id"], a["running"]) for a in listed] == [(agent_id, True)]
    assert listed[0]["model"] == "function" and listed[0]["model_note"] is None

    stopped = await client.post(f"/agents/{agent_id}/stop")
    assert stopped.json()["running"] is False and stopped.json()["status"] == "stopped"
    message = await client.post(f"/{agent_id}/message", json={"text": "hi"})
    assert message.status_code == 409
    assert f"POST /agents/{agent_id}/start" in message.json()["message"]

    assert (await client.delete(f"/agents/{agent_id}")).status_code == 204
    missing = await client.get(f"/agents/{agent_id}")
    assert missing.status_code == 404 and missing.json()["error"] == "agent_not_found"
    assert (await client.delete(f"/agents/{agent_id}")).status_code == 404


async def test_agents_body_over_limit_is_413_naming_the_limit(
    make_manager, settings, make_client
) -> None:
    from carrier.api import ApiSettings, create_app

    small = ApiSettings(max_json_bytes=100, max_upload_bytes=300)
    app = create_app(make_manager(settings), settings, api_settings=small)
    async with make_client(app) as client:
        response = await client.post("/agents", json={**CHARACTER, "bio": ["x" * 200]})
        assert response.status_code == 413
        assert "100 bytes" in response.json()["message"]
        assert "CARRIER_MAX_JSON_BYTES" in response.json()["message"]

        files = {"file": ("big.yaml", b"name: x\n" + b"#" * 400, "application/yaml")}
        response = await client.post("/agents", files=files)
        assert response.status_code == 413
        assert "300 bytes" in response.json()["message"]

        async def chunks():  # no Content-Length: counted as it streams
            for _ in range(5):
                yield b"x" * 50

        response = await client.post(
            "/agents", content=chunks(), headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 413


async def test_start_places_an_agent_on_a_worker_group(client: httpx.AsyncClient) -> None:
    agent_id = await create_running(client)
    placed = await client.post(f"/agents/{agent_id}/start", params={"placement": "eu"})
    assert placed.status_code == 200, placed.text
    assert placed.json()["placement"] == "eu" and placed.json()["status"] == "running"
    kept = (await client.post(f"/agents/{agent_id}/start")).json()
    assert kept["placement"] == "eu"  # left out: as it was
    anywhere = (await client.post(f"/agents/{agent_id}/start", params={"placement": "any"})).json()
    assert anywhere["placement"] is None
    bad = await client.post(f"/agents/{agent_id}/start", params={"placement": "no spaces"})
    assert bad.status_code == 422


async def test_agents_client_config_checked_against_the_clients_settings(
    client: httpx.AsyncClient, manager: AgentManager
) -> None:
    bad = {
        **CHARACTER,
        "clients": ["discord"],
        "clientConfig": {
            "discord": {"maxMessageLength": 5, "allowedMentions": {"everyone": True}},
            "telegram": {"anything": ["goes"]},  # not installed here: only warned of
        },
    }
    refused = await client.post("/agents", json=bad)
    assert refused.status_code == 422, refused.text
    body = refused.json()
    assert body["error"] == "invalid_character"
    problems = {p["path"]: p["message"] for p in body["problems"]}
    assert set(problems) == {
        "clientConfig.discord.maxMessageLength",
        "clientConfig.discord.allowedMentions.everyone",
    }
    assert "greater than or equal to 100" in problems["clientConfig.discord.maxMessageLength"]
    assert await manager.list() == []

    good = {**bad, "clientConfig": {"discord": {"maxMessageLength": 1500}}}
    created = await client.post("/agents", json=good)
    assert created.status_code == 201, created.text
    agent_id = created.json()["id"]

    # An edit is checked the same way, and a refused one stores nothing.
    edited = {**created.json()["character"], "clientConfig": {"discord": {"shards": 0}}}
    refused = await client.put(f"/agents/{agent_id}", json=edited)
    assert refused.status_code == 422
    assert [p["path"] for p in refused.json()["problems"]] == ["clientConfig.discord.shards"]
    stored = (await manager.get(agent_id)).character
    assert stored["clientConfig"] == {"discord": {"maxMessageLength": 1500}}


async def test_clients_lists_the_installed_clients_with_their_settings_schema(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/clients")
    assert response.status_code == 200, response.text
    kinds = {k["name"]: k for k in response.json()}
    assert {"discord", "instagram"} <= set(kinds)
    assert "allowedChannels" in kinds["discord"]["config_schema"]["properties"]
    assert "maxHashtags" in kinds["instagram"]["config_schema"]["properties"]


async def test_validate_refuses_as_a_save_would_and_warns_with_paths(
    client: httpx.AsyncClient, manager: AgentManager
) -> None:
    character = {
        **CHARACTER,
        "modelProvider": "opnai",
        "clients": ["discord", "telegram"],
        "clientConfig": {"discord": {"maxMessageLength": 5}},
    }
    refused = await client.post("/characters/validate", json=character)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"] == "invalid_character"
    assert [p["path"] for p in refused.json()["problems"]] == [
        "clientConfig.discord.maxMessageLength"
    ]
    broken = await client.post("/characters/validate", json={"name": " ", "bio": 5})
    assert broken.status_code == 422
    assert {p["path"] for p in broken.json()["problems"]} == {"name", "bio"}
    literal = {**CHARACTER, "secrets": {"DISCORD_API_TOKEN": "plain-text-credential-value"}}
    refused = await client.post("/characters/validate", json=literal)
    assert [p["path"] for p in refused.json()["problems"]] == ["secrets.DISCORD_API_TOKEN"]
    assert "plain-text-credential-value" not in refused.text

    # What a save would take: its warnings, as carrier validate gives them.
    character["clientConfig"] = {"discord": {"maxMessageLength": 1500}}
    response = await client.post("/characters/validate", json=character)
    assert response.status_code == 200, response.text
    warnings = {w["path"]: w for w in response.json()["warnings"]}
    assert set(warnings) == {"modelProvider", "clients.1"}
    assert warnings["modelProvider"]["kind"] == "unknown-provider"
    assert "did you mean 'openai'?" in warnings["modelProvider"]["message"]
    assert warnings["clients.1"]["kind"] == "unknown-client"
    assert await manager.list() == []  # nothing stored

    # YAML: a value cut short by a comment.
    text = b"name: Pilot\nbio:\n  - Pilot flies at dawn #1 in the fleet\n"
    yaml = await client.post(
        "/characters/validate", content=text, headers={"Content-Type": "application/yaml"}
    )
    assert [(w["path"], w["kind"]) for w in yaml.json()["warnings"]] == [("bio.0", "cut")]


async def test_validate_as_an_edit_of_an_agent(client: httpx.AsyncClient) -> None:
    agent_id = (await client.post("/agents", json=CHARACTER)).json()["id"]
    shown = (await client.get(f"/agents/{agent_id}")).json()["character"]
    ok = await client.post("/characters/validate", params={"agent_id": agent_id}, json=shown)
    assert ok.status_code == 200 and ok.json() == {"warnings": []}
    other = await client.post(
        "/characters/validate", params={"agent_id": agent_id}, json={**shown, "id": "someone-else"}
    )
    assert other.status_code == 422
    assert [p["path"] for p in other.json()["problems"]] == ["id"]
    missing = await client.post("/characters/validate", params={"agent_id": "nobody"}, json=shown)
    assert missing.status_code == 404
    wrong_type = await client.post(
        "/characters/validate", content=b"x", headers={"Content-Type": "text/csv"}
    )
    assert wrong_type.status_code == 415

    # Both need the admin token: an agent's own is refused, saying so.
    made = await client.post("/tokens", json={"name": "pilot", "agent_id": agent_id})
    own = {"Authorization": f"Bearer {made.json()['token']}"}
    for method, path in (("POST", "/characters/validate"), ("GET", "/clients")):
        refused = await client.request(method, path, json=shown, headers=own)
        assert refused.status_code == 403, path
        assert "needs the admin token" in refused.json()["message"]
