"""Character Card PNGs: read the ``chara`` (V2) / ``ccv3`` (V3) text chunk, write one.

Reading parses the PNG chunk list with ``struct``/``zlib`` (no image decoding, no Pillow text
limits); ``tEXt``, ``zTXt`` and ``iTXt`` chunks are understood. Writing uses Pillow.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from carrier.errors import Problem

__all__ = [
    "CARD_CHUNKS",
    "PngCardError",
    "card_from_png",
    "encode_card",
    "read_card_chunks",
    "write_png_chunks",
]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CARD_CHUNKS = ("ccv3", "chara")
"""Text chunk keywords that carry a card, preferred first."""
MAX_CHUNK_TEXT = 4 * 1024 * 1024
"""Most bytes one card text chunk may hold, as stored and once inflated (a large card with a
lorebook is well under 2 MiB of base64)."""
MAX_CARD_TEXT = 6 * 1024 * 1024
"""Most bytes all the card text chunks of one PNG may hold together, once inflated."""
MAX_CHUNKS = 100_000
"""Most chunks a PNG may have (an encoder writes a few dozen to a few thousand)."""
_TEXT_KINDS = (b"tEXt", b"zTXt", b"iTXt")


class PngCardError(ValueError):
    """The PNG could not be read as a card; ``problem`` says why."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(str(problem))
        self.problem = problem


def read_card_chunks(data: bytes) -> dict[str, str]:
    """The card text chunks (``chara``, ``ccv3``) of PNG ``data``, keyword → base64 text.

    Hostile files are bounded: a card chunk may hold at most :data:`MAX_CHUNK_TEXT` bytes,
    stored or inflated (compressed text is inflated with a limit, so a zlib bomb stops there),
    all card chunks together :data:`MAX_CARD_TEXT`; the first chunk of each keyword is the one
    read, later ones are never inflated; other chunks (the image itself) are skipped unread.
    CPU-bound on large files: call it off the event loop (``asyncio.to_thread``)."""
    if not data.startswith(PNG_SIGNATURE):
        raise PngCardError(Problem("", "not a PNG file (bad signature)"))
    view = memoryview(data)
    chunks: dict[str, str] = {}
    budget = MAX_CARD_TEXT
    pos, count = len(PNG_SIGNATURE), 0
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", view[pos : pos + 8])
        count += 1
        if count > MAX_CHUNKS:
            raise PngCardError(
                Problem(
                    "", f"not a card PNG: more than {MAX_CHUNKS:,} chunks (a PNG has far fewer)"
                )
            )
        if pos + 8 + length > len(data):
            raise PngCardError(
                Problem("", f"truncated PNG: chunk {kind!r} at byte {pos} is cut off")
            )
        if kind == b"IEND":
            break
        if kind in _TEXT_KINDS:
            found = _text_chunk(kind, view[pos + 8 : pos + 8 + length], pos, chunks, budget)
            if found is not None:
                chunks[found[0]] = found[1]
                budget -= len(found[1])
        pos += 12 + length
    return chunks


def _text_chunk(
    kind: bytes, body: memoryview, pos: int, seen: dict[str, str], budget: int
) -> tuple[str, str] | None:
    """A card text chunk's keyword and text; None for any other text chunk or a repeated one."""
    keyword = bytes(body[:80]).partition(b"\x00")[0]  # PNG keywords are 1-79 bytes
    key = keyword.decode("latin-1")
    if key not in CARD_CHUNKS or key in seen or len(body) <= len(keyword):
        return None
    where = f"the `{key}` {kind.decode()} chunk at byte {pos}"
    if len(body) > MAX_CHUNK_TEXT:
        raise PngCardError(
            Problem("", f"{where} holds {len(body):,} bytes; a card chunk is at most {_mib()}")
        )
    limit = min(MAX_CHUNK_TEXT, budget)
    rest = bytes(body[len(keyword) + 1 :])
    try:
        if kind == b"tEXt":
            text = rest
        elif kind == b"zTXt":
            text = _inflate(rest[1:], limit, where)
        else:
            compressed = rest[0]
            _lang, _, after = rest[2:].partition(b"\x00")
            _translated, _, raw = after.partition(b"\x00")
            text = _inflate(raw, limit, where) if compressed else raw
        if len(text) > limit:
            raise PngCardError(Problem("", _too_big(where, limit)))
        return key, text.decode("utf-8" if kind == b"iTXt" else "latin-1")
    except (IndexError, zlib.error, UnicodeDecodeError) as exc:
        raise PngCardError(Problem("", f"{where} is damaged: {exc}")) from None


def _inflate(data: bytes, limit: int, where: str) -> bytes:
    """Inflate at most ``limit`` bytes: a bomb is refused after producing that much, never
    inflated whole."""
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, limit + 1)
    if len(out) > limit or inflater.unconsumed_tail:
        raise PngCardError(Problem("", _too_big(where, limit)))
    return out


def _too_big(where: str, limit: int) -> str:
    if limit < MAX_CHUNK_TEXT:
        return (
            f"{where} would take the card text past {_mib(MAX_CARD_TEXT)} in all; "
            "a PNG with this much text is not a card (or is a compression bomb)"
        )
    return (
        f"{where} inflates to more than {_mib()}, the most a card chunk may hold "
        "(a compression bomb, or not a card)"
    )


def _mib(size: int = MAX_CHUNK_TEXT) -> str:
    return f"{size // (1024 * 1024)} MiB"


def card_from_png(data: bytes) -> dict[str, Any]:
    """The card JSON embedded in PNG ``data``; V3 (``ccv3``) wins over V2 (``chara``)."""
    chunks = read_card_chunks(data)
    for key in CARD_CHUNKS:
        if key in chunks:
            return _decode(key, chunks[key])
    raise PngCardError(
        Problem("", "this PNG carries no character card (no `chara` or `ccv3` text chunk)")
    )


def _decode(key: str, text: str) -> dict[str, Any]:
    try:
        raw = base64.b64decode(text.strip(), validate=False)
        card = json.loads(raw.decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PngCardError(
            Problem("", f"the `{key}` chunk is not base64-encoded JSON: {exc}")
        ) from None
    if not isinstance(card, dict):
        raise PngCardError(Problem("", f"the `{key}` chunk holds JSON that is not an object"))
    return card


def encode_card(card: Mapping[str, Any]) -> str:
    """A card as the base64 text that goes into a PNG chunk."""
    raw = json.dumps(card, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(raw).decode("ascii")


def write_png_chunks(
    path: str | Path, chunks: Mapping[str, str], *, image: str | Path | None = None
) -> Path:
    """Write a PNG at ``path`` carrying ``chunks`` (keyword → text) as ``tEXt`` chunks, on top
    of ``image`` (any file Pillow reads) or a small plain avatar."""
    from PIL import Image, PngImagePlugin

    info = PngImagePlugin.PngInfo()
    for key, text in chunks.items():
        info.add_text(key, text)
    path = Path(path)
    if image is not None:
        with Image.open(image) as source:
            picture = source.convert("RGBA")
    else:
        picture = Image.new("RGB", (64, 64), (38, 70, 83))
    picture.save(path, format="PNG", pnginfo=info)
    return path
