"""Hostile card PNGs: compression bombs, oversized and repeated text chunks are refused or
skipped with bounded memory, the error names the chunk, and the API decodes cards in a thread so
one upload cannot stall other requests."""

from __future__ import annotations

import asyncio
import io
import struct
import threading
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import carrier.api.characters as api_characters
from carrier.character import load_character
from carrier.character.png import (
    MAX_CARD_TEXT,
    MAX_CHUNK_TEXT,
    PNG_SIGNATURE,
    PngCardError,
    card_from_png,
    encode_card,
    read_card_chunks,
)
from carrier.errors import CharacterError

CARD: dict[str, Any] = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Lantern",
        "description": "Lantern keeps the harbour light.",
        "first_mes": "Hi.",
    },
}
MIB = 1024 * 1024


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png(*chunks: bytes) -> bytes:
    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    image = chunk(b"IDAT", zlib.compress(b"\x00\x00"))
    return PNG_SIGNATURE + header + b"".join(chunks) + image + chunk(b"IEND", b"")


def zeros_bomb(inflated_mib: int) -> bytes:
    """A zlib stream of ``inflated_mib`` MiB of zeros, made without holding them: one 1 MiB
    segment ended by a full flush is byte-for-byte the same every time, so it is repeated."""
    packer = zlib.compressobj(9)
    block = bytes(MIB)
    head = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    segment = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    return head + segment * (inflated_mib - 1) + packer.flush()


def ztxt(keyword: bytes, compressed: bytes) -> bytes:
    return chunk(b"zTXt", keyword + b"\x00\x00" + compressed)


def itxt(keyword: bytes, compressed: bytes) -> bytes:
    return chunk(b"iTXt", keyword + b"\x00\x01\x00\x00\x00" + compressed)


def text(keyword: bytes, value: bytes) -> bytes:
    return chunk(b"tEXt", keyword + b"\x00" + value)


@pytest.fixture
def memory() -> Iterator[list[int]]:
    """The peak of Python allocations during the test, in bytes (filled in at the end)."""
    peak: list[int] = []
    tracemalloc.start()
    try:
        yield peak
    finally:
        peak.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()


def test_card_a_zTXt_bomb_is_refused_without_inflating_it() -> None:
    bomb = png(ztxt(b"chara", zeros_bomb(1024)))  # 1 MB on disk, 1 GiB inflated
    assert len(bomb) < 1.1 * MIB
    tracemalloc.start()
    try:
        with pytest.raises(PngCardError) as info:
            card_from_png(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * MAX_CHUNK_TEXT  # the 1 GiB never exists; at most one chunk's cap does
    message = str(info.value)
    assert "`chara` zTXt chunk at byte 33" in message and "compression bomb" in message


def test_card_an_iTXt_bomb_is_refused_and_named() -> None:
    with pytest.raises(PngCardError, match="`ccv3` iTXt chunk at byte 33 inflates to more than"):
        read_card_chunks(png(itxt(b"ccv3", zeros_bomb(64))))


def test_card_many_bombs_beside_a_real_card_are_never_inflated() -> None:
    # The shape of the reported file: one real card, then hundreds of zTXt bombs, some
    # repeating the card's keyword and some under other keywords.
    bomb = zeros_bomb(64)
    extra = [ztxt(b"chara", bomb) for _ in range(10)] + [ztxt(b"Comment", bomb) for _ in range(10)]
    data = png(text(b"chara", encode_card(CARD).encode()), *extra)
    tracemalloc.start()
    try:
        card = card_from_png(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert card["data"]["name"] == "Lantern"
    assert peak < 2 * len(data) + MIB  # what is on disk, not 20 x 64 MiB


def test_card_a_text_chunk_over_the_cap_is_refused_by_its_size() -> None:
    big = b"A" * (MAX_CHUNK_TEXT + 1)
    with pytest.raises(PngCardError) as info:
        read_card_chunks(png(text(b"chara", big)))
    assert "`chara` tEXt chunk at byte 33 holds" in str(info.value)
    assert "at most 4 MiB" in str(info.value)


def test_card_text_of_both_chunks_together_is_capped() -> None:
    near = MAX_CHUNK_TEXT - 1024
    assert 2 * near > MAX_CARD_TEXT
    data = png(
        ztxt(b"ccv3", zlib.compress(b"A" * near)), ztxt(b"chara", zlib.compress(b"B" * near))
    )
    with pytest.raises(
        PngCardError,
        match=r"`chara` zTXt chunk at byte \d+ would take the card text past 6 MiB in all",
    ):
        read_card_chunks(data)


def test_card_a_chunk_longer_than_the_file_is_refused() -> None:
    data = png(text(b"chara", b"x"))
    cut = data[:33] + struct.pack(">I", 0xFFFFFFF0) + data[37:]
    with pytest.raises(PngCardError, match="truncated PNG: chunk b'tEXt' at byte 33"):
        read_card_chunks(cut)


def test_card_bomb_as_a_file_is_a_character_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "lantern.png"
    path.write_bytes(png(ztxt(b"chara", zeros_bomb(16))))
    with pytest.raises(CharacterError) as info:
        load_character(path)
    assert info.value.file == str(path)
    assert "`chara` zTXt chunk" in str(info.value)


async def test_api_refuses_a_bomb_card_upload_with_the_chunk_named(
    client: httpx.AsyncClient,
) -> None:
    bomb = png(ztxt(b"chara", zeros_bomb(256)))
    response = await client.post(
        "/agents", files={"file": ("lantern.png", io.BytesIO(bomb), "image/png")}
    )
    assert response.status_code == 422, response.text
    [problem] = response.json()["problems"]
    assert "`chara` zTXt chunk at byte 33" in problem["message"]
    assert (await client.get("/agents")).json() == []


async def test_api_decodes_a_card_off_the_event_loop(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The decode waits (in whatever thread runs it) until another request has been answered:
    # on the event loop that request could never be served, and the wait would run out.
    served = threading.Event()
    decode = api_characters.card_from_png

    def waiting_decode(raw: bytes) -> dict[str, Any]:
        assert served.wait(timeout=30), "the event loop was blocked by the card decode"
        return decode(raw)

    monkeypatch.setattr(api_characters, "card_from_png", waiting_decode)
    data = png(text(b"chara", encode_card(CARD).encode()))

    async def other_request() -> int:
        response = await client.get("/health")
        served.set()
        return response.status_code

    upload = client.post("/agents", files={"file": ("lantern.png", io.BytesIO(data), "image/png")})
    created, health = await asyncio.gather(upload, other_request())
    assert health == 200
    assert created.status_code == 201, created.text
    assert created.json()["name"] == "Lantern"
