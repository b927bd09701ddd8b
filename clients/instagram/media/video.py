"""Check a reel before it is uploaded: container, size, and (read from the file's own boxes)
duration and resolution. No ffmpeg: the ISO base media boxes (``ftyp``, ``moov/mvhd``,
``trak/tkhd``, ``mdia/hdlr``) are parsed here, which covers MP4 and QuickTime MOV."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from clients.instagram.errors import MediaRejected

__all__ = ["PreparedVideo", "VideoInfo", "VideoRules", "check_video", "probe_video"]

_MB = 1024 * 1024
_CONTENT_TYPES = {".mp4": "video/mp4", ".mov": "video/quicktime"}
_MAX_MOOV = 64 * _MB


@dataclass(frozen=True, slots=True)
class VideoRules:
    """Instagram's reel limits (the defaults)."""

    extensions: tuple[str, ...] = (".mp4", ".mov")
    max_bytes: int = 300 * _MB
    min_duration: float = 3.0
    max_duration: float = 15 * 60.0
    max_width: int = 1920


@dataclass(frozen=True, slots=True)
class VideoInfo:
    """What the file's boxes say; ``None`` where the file does not say."""

    brand: str
    duration: float | None
    width: int | None
    height: int | None


@dataclass(frozen=True, slots=True)
class PreparedVideo:
    """A video that passed the checks (it is uploaded as is)."""

    source: Path
    path: Path
    size: int
    info: VideoInfo
    content_type: str


def check_video(source: str | Path, rules: VideoRules | None = None) -> PreparedVideo:
    """Refuse (with :class:`MediaRejected`) a video Instagram would not take as a reel."""
    rules = rules or VideoRules()
    source = Path(source)
    if not source.is_file():
        raise MediaRejected(source, "the file does not exist")
    ext = source.suffix.lower()
    if ext not in rules.extensions:
        raise MediaRejected(source, f"a reel must be {' or '.join(rules.extensions)}, not {ext!r}")
    size = source.stat().st_size
    if size > rules.max_bytes:
        raise MediaRejected(
            source, f"{size / _MB:.0f} MB is more than the {rules.max_bytes // _MB} MB reels allow"
        )
    info = probe_video(source)
    if info.duration is not None and not rules.min_duration <= info.duration <= rules.max_duration:
        raise MediaRejected(
            source,
            f"lasts {info.duration:.1f} s; reels last {rules.min_duration:g} s to "
            f"{rules.max_duration / 60:g} min",
        )
    if info.width is not None and info.width > rules.max_width:
        raise MediaRejected(
            source, f"is {info.width} px wide; reels are at most {rules.max_width} px wide"
        )
    return PreparedVideo(source, source, size, info, _CONTENT_TYPES.get(ext, "video/mp4"))


def probe_video(path: str | Path) -> VideoInfo:
    """Read brand, duration and the first video track's size from an MP4/MOV file."""
    path = Path(path)
    with path.open("rb") as fh:
        brand, moov = _top_level(fh, path)
    if moov is None:
        raise MediaRejected(path, "no 'moov' box: the file is truncated or not a finished video")
    duration: float | None = None
    width = height = None
    for kind, payload in _boxes(moov):
        if kind == b"mvhd":
            duration = _mvhd_duration(payload)
        elif kind == b"trak" and width is None:
            width, height = _video_track_size(payload)
    return VideoInfo(brand=brand, duration=duration, width=width, height=height)


def _top_level(fh: BinaryIO, path: Path) -> tuple[str, bytes | None]:
    brand: str | None = None
    moov: bytes | None = None
    offset = 0
    file_size = path.stat().st_size
    while True:
        fh.seek(offset)
        header = fh.read(8)
        if len(header) < 8:
            break
        size, kind = struct.unpack(">I4s", header)
        header_len = 8
        if size == 1:
            size = struct.unpack(">Q", fh.read(8))[0]
            header_len = 16
        elif size == 0:  # box runs to the end of the file
            size = file_size - offset
        if size < header_len:
            raise MediaRejected(path, f"corrupt box {kind.decode('latin-1')!r} at offset {offset}")
        if offset + size > file_size:
            name = kind.decode("latin-1")
            raise MediaRejected(path, f"the {name!r} box runs past the end: the file is truncated")
        if offset == 0 and kind != b"ftyp":
            raise MediaRejected(path, "not an MP4/MOV file (it does not start with an 'ftyp' box)")
        if kind == b"ftyp":
            brand = fh.read(4).decode("latin-1").strip()
        elif kind == b"moov":
            if size > _MAX_MOOV:
                raise MediaRejected(path, "the 'moov' box is implausibly large")
            moov = fh.read(size - header_len)
        offset += size
    if brand is None:
        raise MediaRejected(path, "not an MP4/MOV file (no 'ftyp' box)")
    return brand, moov


def _boxes(data: bytes) -> list[tuple[bytes, bytes]]:
    out: list[tuple[bytes, bytes]] = []
    offset = 0
    while offset + 8 <= len(data):
        size, kind = struct.unpack_from(">I4s", data, offset)
        header_len = 8
        if size == 1 and offset + 16 <= len(data):
            size = struct.unpack_from(">Q", data, offset + 8)[0]
            header_len = 16
        elif size == 0:
            size = len(data) - offset
        if size < header_len or offset + size > len(data):
            break
        out.append((kind, data[offset + header_len : offset + size]))
        offset += size
    return out


def _mvhd_duration(payload: bytes) -> float | None:
    if not payload:
        return None
    version = payload[0]
    if version == 1 and len(payload) >= 32:
        timescale, duration = struct.unpack_from(">IQ", payload, 20)
    elif len(payload) >= 20:
        timescale, duration = struct.unpack_from(">II", payload, 12)
    else:
        return None
    return duration / timescale if timescale else None


def _video_track_size(trak: bytes) -> tuple[int | None, int | None]:
    size: tuple[int | None, int | None] = (None, None)
    is_video = False
    for kind, payload in _boxes(trak):
        if kind == b"tkhd" and payload:
            offset = 88 if payload[0] == 1 else 76  # width, height: 16.16 fixed point
            if len(payload) >= offset + 8:
                w, h = struct.unpack_from(">II", payload, offset)
                size = (w >> 16, h >> 16)
        elif kind == b"mdia":
            for sub, sub_payload in _boxes(payload):
                if sub == b"hdlr" and sub_payload[8:12] == b"vide":
                    is_video = True
    return size if is_video else (None, None)
