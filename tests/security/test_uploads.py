"""Uploads are kept within a per-agent quota (files and bytes, media and message files alike),
and a refused upload (over quota, no publisher, bad type, too large, a failure after saving)
leaves no file and no record behind."""

from __future__ import annotations

import io
from pathlib import Path

import httpx
import pytest
from starlette.datastructures import UploadFile

from carrier.agents import AgentManager
from carrier.api import ApiSettings
from carrier.api.errors import ApiError
from carrier.api.uploads import UploadQuota
from carrier.settings import Settings
from carrier.types import MemoryKind

QUOTA_FILES = 3
QUOTA_BYTES = 1000


@pytest.fixture
def api_settings() -> ApiSettings:
    return ApiSettings(
        rate_per_minute=6000,
        rate_burst=1000,
        token_cache_seconds=0,
        max_upload_bytes=4000,
        upload_quota_files=QUOTA_FILES,
        upload_quota_bytes=QUOTA_BYTES,
    )


async def poster(client: httpx.AsyncClient) -> str:
    """An agent whose character lists instagram (not running: uploads wait for it)."""
    created = await client.post("/agents", json={"name": "Poster", "clients": ["instagram"]})
    assert created.status_code == 201, created.text
    agent_id: str = created.json()["id"]
    return agent_id


def kept(settings: Settings, agent_id: str) -> list[str]:
    """Every file the agent's uploads keep on disk."""
    root = settings.data_dir
    return sorted(
        str(p.relative_to(root))
        for area in ("media", "uploads")
        if (root / area / agent_id).exists()
        for p in (root / area / agent_id).iterdir()
    )


async def upload(
    client: httpx.AsyncClient, agent_id: str, size: int, kind: str = "image/png"
) -> httpx.Response:
    body = b"\x89PNG" + b"\x00" * (size - 4)
    return await client.post(f"/{agent_id}/media", files={"file": ("p.png", body, kind)})


async def posts(manager: AgentManager, agent_id: str) -> int:
    return len(await manager.store.get_memories(agent_id=agent_id, kinds=[MemoryKind.POST]))


async def test_uploads_quota_counts_files(
    client: httpx.AsyncClient, manager: AgentManager, settings: Settings
) -> None:
    agent_id = await poster(client)
    for _ in range(QUOTA_FILES):
        assert (await upload(client, agent_id, 10)).status_code == 202
    before = kept(settings, agent_id)

    over = await upload(client, agent_id, 10)

    assert over.status_code == 413, over.text
    body = over.json()
    assert body["error"] == "upload_quota"
    assert f"keeps {QUOTA_FILES} uploaded files, its quota is {QUOTA_FILES}" in body["message"]
    assert "CARRIER_UPLOAD_QUOTA_FILES" in body["message"]
    assert kept(settings, agent_id) == before and len(before) == QUOTA_FILES
    assert await posts(manager, agent_id) == QUOTA_FILES


async def test_uploads_quota_counts_bytes_of_media_and_message_files(
    client: httpx.AsyncClient, manager: AgentManager, settings: Settings
) -> None:
    agent_id = await poster(client)
    assert (await upload(client, agent_id, 600)).status_code == 202
    await client.post(f"/agents/{agent_id}/start")
    sent = await client.post(
        f"/{agent_id}/message",
        data={"text": "see the attached notes", "user_id": "ana"},
        files={"file": ("notes.txt", b"n" * 300, "text/plain")},
    )
    assert sent.status_code == 200, sent.text
    before = kept(settings, agent_id)
    assert len(before) == 2  # one under media/, one under uploads/

    too_big = await upload(client, agent_id, 200)
    assert too_big.status_code == 413, too_big.text
    assert "does not fit" in too_big.json()["message"]
    assert "CARRIER_UPLOAD_QUOTA_BYTES" in too_big.json()["message"]
    as_message = await client.post(
        f"/{agent_id}/message",
        data={"text": "one more file"},
        files={"file": ("more.txt", b"m" * 200, "text/plain")},
    )
    assert as_message.status_code == 413 and as_message.json()["error"] == "upload_quota"
    assert kept(settings, agent_id) == before
    assert (await upload(client, agent_id, 90)).status_code == 202  # what is left still fits


async def test_uploads_without_a_publisher_are_refused_and_not_kept(
    client: httpx.AsyncClient, manager: AgentManager, settings: Settings
) -> None:
    agent_id = (await client.post("/agents", json={"name": "Plain"})).json()["id"]
    for _ in range(QUOTA_FILES + 2):
        refused = await upload(client, agent_id, 10)
        assert refused.status_code == 409 and refused.json()["error"] == "no_publisher"
    assert kept(settings, agent_id) == []
    assert await posts(manager, agent_id) == 0


async def test_uploads_refused_for_type_size_or_fields_leave_nothing(
    client: httpx.AsyncClient, manager: AgentManager, settings: Settings
) -> None:
    agent_id = await poster(client)
    text = await upload(client, agent_id, 10, kind="text/plain")
    assert text.status_code == 422
    assert kept(settings, agent_id) == []
    too_large = await upload(client, agent_id, 5000)  # over CARRIER_MAX_UPLOAD_BYTES
    assert too_large.status_code == 413 and too_large.json()["error"] == "content_too_large"
    assert kept(settings, agent_id) == []
    bad_time = await client.post(
        f"/{agent_id}/media",
        data={"publish_at": "next tuesday"},
        files={"file": ("p.png", b"\x89PNG", "image/png")},
    )
    assert bad_time.status_code == 422
    assert kept(settings, agent_id) == []
    assert await posts(manager, agent_id) == 0


async def test_uploads_failure_after_saving_removes_the_file(
    client: httpx.AsyncClient,
    manager: AgentManager,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent_id = await poster(client)

    async def broken(memory: object) -> None:
        raise RuntimeError("the store is gone")

    monkeypatch.setattr(manager.store, "add_memory", broken)
    with pytest.raises(RuntimeError, match="the store is gone"):
        await upload(client, agent_id, 10)
    assert kept(settings, agent_id) == []


async def test_uploads_quota_is_checked_again_on_disk(tmp_path: Path) -> None:
    # A declared size that lies (or another upload that landed meanwhile) passes the first
    # check; the second one, on what is really on disk, refuses it and removes the file.
    quota = UploadQuota(tmp_path, max_files=10, max_bytes=100)
    (tmp_path / "uploads" / "a1").mkdir(parents=True)
    (tmp_path / "uploads" / "a1" / "earlier.txt").write_bytes(b"e" * 60)
    liar = UploadFile(io.BytesIO(b"x" * 80), filename="x.png", size=1)

    with pytest.raises(ApiError) as info:
        await quota.save(liar, agent_id="a1", area="media")

    assert info.value.status == 413 and "does not fit" in info.value.message
    assert not any((tmp_path / "media" / "a1").iterdir())
    assert quota.usage("a1").files == 1
    honest = UploadFile(io.BytesIO(b"y" * 40), filename="y.png", size=40)
    saved = await quota.save(honest, agent_id="a1", area="media")
    assert saved.path.read_bytes() == b"y" * 40 and quota.usage("a1").bytes == 100
