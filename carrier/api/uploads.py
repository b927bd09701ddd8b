"""Per-agent upload quota: how many files and bytes an agent's uploads may keep on disk.

Everything an agent's uploads keep lives under ``<data_dir>/media/<agent_id>/`` (media to post)
and ``<data_dir>/uploads/<agent_id>/`` (files sent with messages); the quota counts both. It is
checked twice: before writing, against the upload's declared size (the common refusal costs no
disk), and after, against what is really on disk with the new file in it, so two uploads racing
(in one process or several sharing the data dir) can never leave the agent over its quota. An
upload refused either way leaves no file behind.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.datastructures import UploadFile

from carrier.api.bodies import SavedFile, save_upload
from carrier.api.errors import ApiError

if TYPE_CHECKING:
    from carrier.api.state import ApiState

__all__ = ["UPLOAD_AREAS", "UploadQuota", "Usage", "discard", "upload_quota"]

UPLOAD_AREAS = ("media", "uploads")
"""The folders under the data dir where uploads are kept, one sub-folder per agent."""


@dataclass(frozen=True, slots=True)
class Usage:
    files: int
    bytes: int


@dataclass(frozen=True, slots=True)
class UploadQuota:
    """The limits (``CARRIER_UPLOAD_QUOTA_FILES`` / ``CARRIER_UPLOAD_QUOTA_BYTES``) over one
    data dir."""

    data_dir: Path
    max_files: int
    max_bytes: int

    def folder(self, area: str, agent_id: str) -> Path:
        return self.data_dir / area / agent_id

    def usage(self, agent_id: str) -> Usage:
        """What the agent's uploads keep on disk now (blocking: call it in a thread)."""
        files = size = 0
        for area in UPLOAD_AREAS:
            try:
                entries = list(os.scandir(self.folder(area, agent_id)))
            except FileNotFoundError:
                continue
            for entry in entries:
                try:
                    if entry.is_file(follow_symlinks=False):
                        files += 1
                        size += entry.stat(follow_symlinks=False).st_size
                except FileNotFoundError:  # removed meanwhile
                    continue
        return Usage(files, size)

    async def save(self, upload: UploadFile, *, agent_id: str, area: str) -> SavedFile:
        """Save ``upload`` under the agent's ``area`` folder if the quota allows it; otherwise
        413 ``upload_quota`` saying what is used and how to make room, with nothing written."""
        size = upload.size if upload.size is not None else await asyncio.to_thread(_size, upload)
        self._check(agent_id, await asyncio.to_thread(self.usage, agent_id), 1, size)
        saved = await save_upload(upload, self.folder(area, agent_id))
        after = await asyncio.to_thread(self.usage, agent_id)
        try:  # the same check, with what is on disk besides this file
            self._check(agent_id, Usage(after.files - 1, after.bytes - saved.size), 1, saved.size)
        except ApiError:
            await discard(saved)
            raise
        return saved

    def _check(self, agent_id: str, usage: Usage, files: int, size: int) -> None:
        if usage.files + files > self.max_files:
            raise ApiError(
                413,
                "upload_quota",
                f"agent {agent_id} keeps {usage.files} uploaded files, its quota is "
                f"{self.max_files}: {_room('CARRIER_UPLOAD_QUOTA_FILES', agent_id)}",
            )
        if usage.bytes + size > self.max_bytes:
            left = max(self.max_bytes - usage.bytes, 0)
            raise ApiError(
                413,
                "upload_quota",
                f"this upload ({_mb(size)}) does not fit in agent "
                f"{agent_id}'s upload quota ({_mb(self.max_bytes)}, {_mb(left)} left): "
                f"{_room('CARRIER_UPLOAD_QUOTA_BYTES', agent_id)}",
            )


def upload_quota(state: ApiState) -> UploadQuota:
    """The quota the API's settings set, over its data dir."""
    return UploadQuota(
        state.settings.data_dir,
        max_files=state.api_settings.upload_quota_files,
        max_bytes=state.api_settings.upload_quota_bytes,
    )


async def discard(saved: SavedFile) -> None:
    """Remove a saved upload that was refused after all (a quota race, a failure after it)."""
    await asyncio.to_thread(saved.path.unlink, missing_ok=True)


def _room(setting: str, agent_id: str) -> str:
    return (
        f"the operator can raise {setting}, or make room by removing old files from "
        f"media/{agent_id} and uploads/{agent_id} in the data dir"
    )


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


def _size(upload: UploadFile) -> int:
    upload.file.seek(0, os.SEEK_END)
    size = upload.file.tell()
    upload.file.seek(0)
    return size
