"""Test helpers for the Instagram tests: a manual clock and generated media."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from PIL import Image

FTP_USER, FTP_PASSWORD, TOKEN = "carrier", "ftp-s3cret", "EAAG-very-secret-token"


@dataclass
class ManualClock:
    """Time that moves only when something sleeps on it (no test waits on the wall clock)."""

    now: datetime = field(default_factory=lambda: datetime(2025, 6, 1, 12, 0, tzinfo=UTC))
    slept: list[float] = field(default_factory=list)

    def __call__(self) -> datetime:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += timedelta(seconds=seconds)

    def advance(self, **kwargs: float) -> None:
        self.now += timedelta(**kwargs)


def make_image(
    path: Path, size: tuple[int, int] = (1080, 1080), mode: str = "RGB", fmt: str = "JPEG"
) -> Path:
    colour: tuple[int, ...] = (200, 120, 40, 128) if mode == "RGBA" else (200, 120, 40)
    img = Image.new(mode, size, colour if mode in ("RGB", "RGBA") else 128)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, fmt)
    return path


def make_mp4(path: Path, *, duration: float = 8.0, width: int = 1080, height: int = 1920) -> Path:
    """A minimal MP4: ftyp + moov(mvhd, trak(tkhd, mdia(hdlr vide))) + a little mdat."""

    def box(kind: bytes, payload: bytes) -> bytes:
        return (8 + len(payload)).to_bytes(4, "big") + kind + payload

    timescale = 1000
    mvhd = (
        bytes(4)
        + bytes(8)
        + timescale.to_bytes(4, "big")
        + int(duration * timescale).to_bytes(4, "big")
    )
    mvhd += bytes(100 - len(mvhd))
    tkhd = bytearray(84)
    tkhd[76:80] = (width << 16).to_bytes(4, "big")
    tkhd[80:84] = (height << 16).to_bytes(4, "big")
    hdlr = bytes(8) + b"vide" + bytes(12) + b"VideoHandler\x00"
    trak = box(b"tkhd", bytes(tkhd)) + box(b"mdia", box(b"hdlr", hdlr))
    moov = box(b"mvhd", mvhd) + box(b"trak", trak)
    data = box(b"ftyp", b"isom" + bytes(4) + b"isomiso2mp41") + box(b"moov", moov)
    data += box(b"mdat", io.BytesIO(bytes(2048)).getvalue())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
