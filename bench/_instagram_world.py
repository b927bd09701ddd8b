"""The Instagram side of ``bench/_scale_jobs.py``: accounts, the media host, scheduled uploads.

- :func:`prepare`: the folders, and one uploaded file per post;
- :func:`character`: an agent posting with the Graph publisher to its own
  :class:`~clients.instagram.fake.FakeGraphAPI` account, media on the loopback FTP server
  (:func:`ftp_server`) in a folder that fake serves as the public URLs Instagram fetches;
- :func:`schedule_upload`: a post as the product takes a scheduled upload (``POST
  /{agent_id}/media`` with a ``publish_at``, queued by the Instagram client's
  ``accept_media``): a ``post`` memory with the file and caption, and an ``instagram.post``
  job due at ``publish_at``, keyed by the upload.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

from carrier.jobs.base import JobStore
from carrier.jobs.model import Job
from carrier.memory.base import Store
from carrier.types import Attachment, Content, Memory, MemoryKind, MemoryStatus, stable_id
from clients.instagram.fake import FakeGraphAPI
from clients.instagram.jobs import POST_JOB_KIND

__all__ = [
    "FTP_PASSWORD",
    "FTP_USER",
    "TOKEN",
    "character",
    "ftp_dirs",
    "ftp_server",
    "prepare",
    "schedule_upload",
]

TOKEN = "bench-graph-token-0123456789"
FTP_USER, FTP_PASSWORD = "carrier", "bench-ftp-password-0123"


def prepare(workdir: Path, agents: int, jobs: int, tag: str) -> list[Path]:
    """The folders, and one uploaded file per post (a 1080x1080 JPEG, as a phone sends)."""
    from PIL import Image

    uploads = workdir / "data" / "media"
    for folder in (workdir / "characters", uploads, *ftp_dirs(workdir, agents)):
        folder.mkdir(parents=True, exist_ok=True)
    frame = workdir / "frame.jpg"
    Image.new("RGB", (1080, 1080), (40, 90, 160)).save(frame, "JPEG", quality=85)
    image = frame.read_bytes()
    files = [uploads / f"bench-{tag}-{k:04d}.jpg" for k in range(jobs)]
    for path in files:
        path.write_bytes(image)
    return files


def ftp_dirs(workdir: Path, agents: int) -> list[Path]:
    return [workdir / "ftp" / f"agent{i}" for i in range(agents)]


def character(index: int, fake: FakeGraphAPI, ftp_port: int) -> dict[str, Any]:
    return {
        "name": f"Harbour{index}",
        "bio": [f"Harbour{index} photographs the harbour at dawn."],
        "clients": ["instagram"],
        "clientConfig": {
            "instagram": {
                "publisher": "graph",
                "igUserId": fake.ig_user_id,
                "graphBaseUrl": fake.url,
                "dailyLimit": 1_000_000,  # the benchmark is not about the 24 h quota
                "ftp": {
                    "host": "127.0.0.1",
                    "port": ftp_port,
                    "user": FTP_USER,
                    "directory": f"/agent{index}",
                    "baseUrl": fake.media_url,
                },
            }
        },
    }


@contextlib.asynccontextmanager
async def ftp_server(root: Path) -> AsyncIterator[int]:
    import aioftp

    server = aioftp.Server([aioftp.User(FTP_USER, FTP_PASSWORD, base_path=root)])
    await server.start("127.0.0.1", 0)
    try:
        yield int(server.address[1])
    finally:
        await server.close()


async def schedule_upload(
    store: Store,
    jobs: JobStore,
    agent_id: str,
    upload: Path,
    caption: str,
    due: datetime,
    size: int,
) -> Job:
    """A scheduled upload, as ``POST /{agent_id}/media`` stores it and the Instagram client's
    ``accept_media`` queues it."""
    media_id = upload.stem
    memory = Memory(
        id=media_id,
        agent_id=agent_id,
        room_id=stable_id(agent_id, "api", "media"),
        entity_id=stable_id(agent_id, "api", "bench"),
        kind=MemoryKind.POST,
        status=MemoryStatus.RECEIVED,
        content=Content(
            text=caption,
            source="api",
            attachments=[
                Attachment(
                    id=media_id,
                    path=str(upload),
                    title=upload.name,
                    content_type="image/jpeg",
                    size=size,
                )
            ],
            metadata={"media_id": media_id, "publish_at": due.isoformat(), "uploaded_by": "bench"},
        ),
    )
    await store.add_memory(memory)
    return await jobs.enqueue(
        POST_JOB_KIND,
        agent_id=agent_id,
        payload={"source": "upload", "upload_id": media_id},
        run_at=due,
        idempotency_key=f"instagram:upload:{media_id}",
    )
