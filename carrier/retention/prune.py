"""Deleting what is older than a time: an agent's memories of some kinds, and uploaded files.

Used by the daily retention job (:mod:`carrier.retention.job`) and ``carrier memory prune``.
Every function counts first and deletes only when not ``dry_run``, so a dry run says exactly
what a real run would delete at that moment.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

from carrier.memory.base import Store
from carrier.memory.rights import iter_memories
from carrier.types import MemoryKind, MemoryStatus

__all__ = [
    "UPLOAD_FOLDERS",
    "count_older",
    "pending_media",
    "prune_files",
    "prune_memories",
    "prune_uploads",
    "upload_folders",
]

log = logging.getLogger(__name__)

UPLOAD_FOLDERS = ("uploads", "media")
"""Where an agent's uploads live under the data dir, each in a folder named by the agent's id:
``uploads/`` (files sent with messages) and ``media/`` (media to post, ``POST /{id}/media``)."""


async def count_older(
    store: Store,
    *,
    agent_id: str,
    kinds: Sequence[MemoryKind],
    before: datetime,
    room_id: str | None = None,
) -> int:
    """How many of the agent's memories of ``kinds`` were created before ``before``."""
    count = 0
    async for _ in iter_memories(
        store, agent_id=agent_id, room_id=room_id, kinds=kinds, before=before
    ):
        count += 1
    return count


async def prune_memories(
    store: Store,
    *,
    agent_id: str,
    kinds: Sequence[MemoryKind],
    before: datetime,
    room_id: str | None = None,
    dry_run: bool = False,
) -> int:
    """Delete the agent's memories of ``kinds`` created before ``before`` (in one room, when
    given); returns how many went (or would go, with ``dry_run``)."""
    if dry_run:
        return await count_older(
            store, agent_id=agent_id, kinds=kinds, before=before, room_id=room_id
        )
    return await store.delete_memories(
        agent_id=agent_id, room_id=room_id, kinds=list(kinds), before=before
    )


def upload_folders(data_dir: Path, agent_id: str) -> list[Path]:
    """The agent's upload folders (that may not exist)."""
    return [data_dir / folder / agent_id for folder in UPLOAD_FOLDERS]


async def pending_media(store: Store, *, agent_id: str) -> set[str]:
    """Files an upload still waiting to be posted needs (a ``post`` memory still ``received``):
    kept whatever their age, or the post would fail when it comes."""
    waiting = await store.get_memories(
        agent_id=agent_id,
        kinds=[MemoryKind.POST],
        statuses=[MemoryStatus.RECEIVED],
        limit=10_000,
        embeddings=False,
    )
    return {a.path for m in waiting for a in m.content.attachments if a.path is not None}


def prune_files(
    folders: Iterable[Path],
    *,
    before: datetime,
    keep: Iterable[str | Path] = (),
    dry_run: bool = False,
) -> int:
    """Delete the files directly in ``folders`` last modified before ``before``, except those in
    ``keep``; returns how many went (or would go). Blocking: run it in a thread."""
    cutoff = before.timestamp()
    kept = {os.path.abspath(path) for path in keep}
    count = 0
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            continue
        for entry in entries:
            if not entry.is_file(follow_symlinks=False):
                continue
            path = Path(entry.path)
            if entry.stat(follow_symlinks=False).st_mtime >= cutoff:
                continue
            if os.path.abspath(path) in kept:
                continue
            count += 1
            if not dry_run:
                try:
                    path.unlink()
                except FileNotFoundError:  # another process pruned it first
                    count -= 1
    return count


async def prune_uploads(
    store: Store, data_dir: Path, *, agent_id: str, before: datetime, dry_run: bool = False
) -> int:
    """Delete the agent's uploaded files older than ``before`` (see :func:`prune_files`),
    keeping what a waiting post needs."""
    keep = await pending_media(store, agent_id=agent_id)
    folders = upload_folders(data_dir, agent_id)
    return await asyncio.to_thread(prune_files, folders, before=before, keep=keep, dry_run=dry_run)
