"""Drafts: a post ready to publish (media + caption), as it travels in a job's payload, and the
post memory recorded once it is out (or would have been, for a dry run).

The draft sits under ``payload["draft"]`` of an ``instagram.post`` job while it awaits approval
(where ``GET /jobs/{id}`` shows it and ``POST /jobs/{id}/approve`` may edit its caption), then
of the ``instagram.publish`` job that publishes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from carrier.memory.base import Store
from carrier.memory.embedder import Embedder
from carrier.types import Attachment, Content, Memory, MemoryKind, MemoryStatus, stable_id
from clients.instagram.post import Post, PostKind, PublishResult

__all__ = ["Draft", "post_memory_id", "record_post"]


class Draft(BaseModel):
    """One post, drafted."""

    post_key: str = Field(min_length=1)
    """The idempotency key of the post (its ``instagram.post`` job id): published once."""
    kind: PostKind
    media: list[str] = Field(min_length=1)
    """Absolute paths of the media files."""
    caption: str = Field(default="", max_length=2200)
    source: Literal["library", "upload"]
    library_file: str | None = None
    """The file's path in the plan's library folder."""
    upload_id: str | None = None
    """The ``post`` memory of an upload (``POST /{agent_id}/media``)."""
    caption_by: str = "model"
    """``model``, ``uploader`` (given with the upload) or ``operator`` (edited at approval)."""
    similarity: float | None = None
    """Highest cosine similarity to a recent post when the caption was written."""
    dry_run: bool = False

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Draft | None:
        raw = payload.get("draft")
        return cls.model_validate(raw) if isinstance(raw, dict) else None

    def post(self) -> Post:
        return Post(
            key=self.post_key,
            kind=self.kind,
            media=[Path(p) for p in self.media],
            caption=self.caption,
        )


def post_memory_id(agent_id: str, post_key: str) -> str:
    """The id of the memory of a post: one per post, whatever retries or restarts happen."""
    return stable_id(agent_id, "instagram", "post", post_key)


async def record_post(
    *,
    store: Store,
    embedder: Embedder,
    agent_id: str,
    draft: Draft,
    result: PublishResult,
    job_id: str,
) -> Memory:
    """Store the post as a ``post`` memory (caption text, permalink, media id; embedded, so new
    captions are compared with it). Recorded once per post key."""
    existing = await store.get_memory(post_memory_id(agent_id, draft.post_key))
    if existing is not None:
        return existing
    caption = result.caption or draft.caption
    vector = await embedder.embed_one(caption) if caption.strip() else None
    memory = Memory(
        id=post_memory_id(agent_id, draft.post_key),
        agent_id=agent_id,
        room_id=stable_id(agent_id, "instagram", "feed"),
        entity_id=agent_id,
        kind=MemoryKind.POST,
        status=MemoryStatus.STORED,
        content=Content(
            text=caption,
            source="instagram",
            attachments=[Attachment(path=p, title=Path(p).name) for p in draft.media],
            metadata={
                "post_key": draft.post_key,
                "job_id": job_id,
                "kind": draft.kind.value,
                "media_id": result.media_id,
                "permalink": result.permalink,
                "container_id": result.container_id,
                "publisher": result.publisher,
                "dry_run": result.dry_run,
                "source": draft.source,
                "library_file": draft.library_file,
                "upload_id": draft.upload_id,
                "caption_by": draft.caption_by,
                "changes": list(result.changes),
            },
        ),
        embedding=[float(x) for x in vector] if vector is not None else None,
        embedding_model=embedder.model_id if vector is not None else None,
    )
    return await store.add_memory(memory)
