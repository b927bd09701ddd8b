"""Media checks and conversion, run before anything is uploaded."""

from __future__ import annotations

from clients.instagram.media.images import ImageRules, PreparedImage, prepare_image
from clients.instagram.media.video import (
    PreparedVideo,
    VideoInfo,
    VideoRules,
    check_video,
    probe_video,
)

__all__ = [
    "ImageRules",
    "PreparedImage",
    "PreparedVideo",
    "VideoInfo",
    "VideoRules",
    "check_video",
    "prepare_image",
    "probe_video",
]
