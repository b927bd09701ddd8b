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
_MAX_TEXT = 64 * 1024 * 1024


class PngCardError(ValueError):
    """The PNG could not be read as a card; ``problem`` says why."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(str(problem))
        self.problem = problem


def read_card_chunks(data: bytes) -> dict[str, str]:
    """The card text chunks (``chara``, ``ccv3``) of PNG ``data``, keyword → base64 text."""
    if not data.startswith(PNG_SIGNATURE):
        raise PngCardError(Problem("", "not a PNG file (bad signature)"))
    chunks: dict[str, str] = {}
    pos = len(PNG_SIGNATURE)
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if len(body) < length:
            raise PngCardError(
                Problem("", f"truncated PNG: chunk {kind!r} at byte {pos} is cut off")
            )
        pos += 12 + length
        if kind == b"IEND":
            break
        text = _text_chunk(kind, body)
        if text is not None and text[0] in CARD_CHUNKS and text[0] not in chunks:
            chunks[text[0]] = text[1]
    return chunks


def _text_chunk(kind: bytes, body: bytes) -> tuple[str, str] | None:
    if kind not in (b"tEXt", b"zTXt", b"iTXt"):
        return None
    keyword, sep, rest = body.partition(b"\x00")
    if not sep:
        return None
    key = keyword.decode("latin-1")
    if key not in CARD_CHUNKS:
        return None
    try:
        if kind == b"tEXt":
            return key, rest.decode("latin-1")
        if kind == b"zTXt":
            return key, _inflate(rest[1:]).decode("latin-1")
        compressed, _method = rest[0], rest[1]
        _lang, _, rest = rest[2:].partition(b"\x00")
        _translated, _, text = rest.partition(b"\x00")
        return key, (_inflate(text) if compressed else text).decode("utf-8")
    except (IndexError, zlib.error, UnicodeDecodeError, ValueError) as exc:
        raise PngCardError(Problem("", f"the {key!r} text chunk is damaged: {exc}")) from None


def _inflate(data: bytes) -> bytes:
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, _MAX_TEXT)
    if inflater.unconsumed_tail:
        raise ValueError("compressed text is larger than 64 MiB")
    return out


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
