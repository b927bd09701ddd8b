"""A posting plan's media library: a folder whose files are each posted once.

Which files are used is kept in the Store's settings (``instagram:<agent>:library``, a map of
file → the job that took it), so a restart, a second process or a rebuilt folder never posts a
file twice. A job that runs again gets the file it took before. Dry runs keep their own record
(``...:library:dry-run``), so rehearsing a plan does not use up the real library.

A text file beside a media file with the same stem (``fog.jpg`` + ``fog.txt``) holds notes about
it for the caption writer (where, which film, what happened).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from carrier.memory.base import Store
from clients.instagram.post import PostKind

__all__ = ["IMAGE_SUFFIXES", "VIDEO_SUFFIXES", "LibraryPick", "MediaLibrary", "post_kind_of"]

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff"})
VIDEO_SUFFIXES = frozenset({".mp4", ".mov"})
_NOTE_SUFFIXES = (".txt", ".md")


def post_kind_of(path: Path) -> PostKind:
    """A video is posted as a reel, anything else as a photo."""
    return PostKind.REEL if path.suffix.lower() in VIDEO_SUFFIXES else PostKind.PHOTO


@dataclass(frozen=True, slots=True)
class LibraryPick:
    path: Path
    name: str
    """The path relative to the library folder (how it is recorded as used)."""
    notes: str
    """The text beside it, if any."""


class MediaLibrary:
    """The media folder of one agent's plan. ``order``: ``sequential`` (by relative path) or
    ``random`` (drawn with a generator seeded by the job key). Keep one per agent and process
    (the Instagram client does): takes are serialized by its lock, and across processes by the
    ``instagram.post`` jobs running one at a time."""

    def __init__(
        self,
        *,
        root: Path,
        store: Store,
        agent_id: str,
        order: Literal["sequential", "random"] = "sequential",
    ) -> None:
        self.root = root
        self.store = store
        self.agent_id = agent_id
        self.order = order
        self._lock = asyncio.Lock()

    def _key(self, dry_run: bool) -> str:
        return f"instagram:{self.agent_id}:library" + (":dry-run" if dry_run else "")

    def files(self) -> list[str]:
        """Media files under the folder (hidden ones skipped), as relative paths, sorted."""
        if not self.root.is_dir():
            return []
        names = [
            path.relative_to(self.root).as_posix()
            for path in self.root.rglob("*")
            if path.is_file()
            and path.suffix.lower() in IMAGE_SUFFIXES | VIDEO_SUFFIXES
            and not any(part.startswith(".") for part in path.relative_to(self.root).parts)
        ]
        return sorted(names, key=lambda n: (n.casefold(), n))

    async def used(self, *, dry_run: bool = False) -> dict[str, dict[str, str]]:
        """File → ``{"job": key, "at": iso time}`` for every file taken."""
        value = await self.store.get_setting(self._key(dry_run))
        return dict(value) if isinstance(value, dict) else {}

    async def unused(self, *, dry_run: bool = False) -> list[str]:
        taken = await self.used(dry_run=dry_run)
        return [name for name in self.files() if name not in taken]

    async def take(
        self, job_key: str, *, now: datetime, dry_run: bool = False
    ) -> LibraryPick | None:
        """The file for ``job_key``: the one it took before, else the next unused one (recorded
        as used before it is returned). ``None`` when every file has been used."""
        async with self._lock:
            taken = await self.used(dry_run=dry_run)
            for name, record in taken.items():
                if record.get("job") == job_key and (self.root / name).is_file():
                    return await asyncio.to_thread(self._pick, name)
            files = await asyncio.to_thread(self.files)
            free = [name for name in files if name not in taken]
            if not free:
                return None
            name = free[0] if self.order == "sequential" else random.Random(job_key).choice(free)
            taken[name] = {"job": job_key, "at": now.isoformat()}
            await self.store.set_setting(self._key(dry_run), taken)
            return await asyncio.to_thread(self._pick, name)

    def _pick(self, name: str) -> LibraryPick:
        path = self.root / name
        notes = ""
        for suffix in _NOTE_SUFFIXES:
            note = path.with_suffix(suffix)
            if note.is_file():
                notes = note.read_text(encoding="utf-8", errors="replace").strip()
                break
        return LibraryPick(path=path, name=name, notes=notes)
