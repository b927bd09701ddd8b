"""/agents/{id}/knowledge: list, upload (kept under the data dir and ingested), remove, re-sync;
the size and type limits; an agent token reads its own agent's documents only."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from carrier.api.routes import knowledge as knowledge_routes
from carrier.settings import Settings
from tests.api.conftest import bearer, create_running

GUIDE = b"# Harbor guide\n\n" + b"The harbor opens at dawn and closes at dusk. " * 60


def _kept(settings: Settings, agent_id: str, name: str) -> Path:
    """Where an upload of ``name`` is kept."""
    return Path(settings.data_dir).resolve() / "knowledge" / agent_id / name


async def _upload(
    client: httpx.AsyncClient, agent_id: str, name: str, data: bytes
) -> httpx.Response:
    return await client.post(f"/agents/{agent_id}/knowledge", files={"file": (name, data)})


async def test_upload_lists_chunks_then_remove_forgets_it(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    agent_id = await create_running(client)
    empty = await client.get(f"/agents/{agent_id}/knowledge")
    assert empty.status_code == 200, empty.text
    assert empty.json()["documents"] == []

    up = await _upload(client, agent_id, "guide.md", GUIDE)
    assert up.status_code == 201, up.text
    assert up.json()["chunks_embedded"] > 0
    kept = _kept(settings, agent_id, "guide.md")
    assert kept.read_bytes() == GUIDE

    listed = (await client.get(f"/agents/{agent_id}/knowledge")).json()
    (doc,) = listed["documents"]
    assert doc["source"] == str(kept)
    assert doc["title"] == "Harbor guide"
    assert doc["origin"] == "upload" and doc["state"] == "synced"
    assert doc["chunks"] > 0 and listed["chunks"] == doc["chunks"]

    # The same name again replaces it; a re-sync with nothing changed changes nothing.
    again = await _upload(client, agent_id, "guide.md", GUIDE + b"Boats moor at pier 4.")
    assert again.json()["updated"] == [str(kept)]
    synced = await client.post(f"/agents/{agent_id}/knowledge/sync")
    assert synced.status_code == 200, synced.text
    assert synced.json()["unchanged"] == [str(kept)] and synced.json()["error"] is None

    gone = await client.request(
        "DELETE", f"/agents/{agent_id}/knowledge", params={"source": str(kept)}
    )
    assert gone.status_code == 200, gone.text
    assert gone.json()["removed"] == [str(kept)]
    assert not kept.exists()
    assert (await client.get(f"/agents/{agent_id}/knowledge")).json()["documents"] == []
    missing = await client.request(
        "DELETE", f"/agents/{agent_id}/knowledge", params={"source": str(kept)}
    )
    assert missing.status_code == 404


async def test_resync_forgets_an_upload_whose_file_went(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    agent_id = await create_running(client)
    await _upload(client, agent_id, "notes.txt", b"Tide tables are posted weekly.")
    kept = _kept(settings, agent_id, "notes.txt")
    kept.unlink()
    (doc,) = (await client.get(f"/agents/{agent_id}/knowledge")).json()["documents"]
    assert doc["state"] == "missing"
    synced = (await client.post(f"/agents/{agent_id}/knowledge/sync")).json()
    assert synced["removed"] == [str(kept)]
    assert (await client.get(f"/agents/{agent_id}/knowledge")).json()["documents"] == []


async def test_type_and_size_are_refused_with_the_fix(
    client: httpx.AsyncClient, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_id = await create_running(client)
    wrong = await _upload(client, agent_id, "slides.pptx", b"PK...")
    assert wrong.status_code == 422
    body = wrong.json()
    assert body["problems"][0]["path"] == "file"
    assert ".txt" in body["message"] and "slides.pptx" in body["message"]

    monkeypatch.setattr(knowledge_routes, "MAX_DOCUMENT_BYTES", 100)
    big = await _upload(client, agent_id, "big.txt", b"x" * 101)
    assert big.status_code == 413
    assert "carrier knowledge add" in big.json()["message"]
    assert not _kept(settings, agent_id, "big.txt").exists()
    json_body = await client.post(f"/agents/{agent_id}/knowledge", json={"file": "guide.md"})
    assert json_body.status_code == 415 and "multipart" in json_body.json()["message"]


async def test_an_agent_token_reads_its_agent_only(client: httpx.AsyncClient) -> None:
    mine = await create_running(client)
    other = await create_running(client, {"name": "Other", "bio": ["b"], "clients": []})
    await _upload(client, mine, "guide.md", GUIDE)
    made = await client.post("/tokens", json={"name": "kn", "agent_id": mine})
    token = made.json()["token"]
    own = await client.get(f"/agents/{mine}/knowledge", headers=bearer(token))
    assert own.status_code == 200 and len(own.json()["documents"]) == 1
    assert (
        await client.get(f"/agents/{other}/knowledge", headers=bearer(token))
    ).status_code == 403
    refused = await client.post(
        f"/agents/{mine}/knowledge", files={"file": ("a.txt", b"hi")}, headers=bearer(token)
    )
    assert refused.status_code == 403
