"""Knowledge test helpers: a counting embedder, a hand-written PDF, a character file on disk."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from carrier.character import Character, load_character
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore

# The store contract suite's factories, to run one ingest test on every backend (the MongoDB
# servers are the session's, from tests/conftest.py).
from tests.memory.conftest import store_factory  # noqa: F401


class CountingEmbedder(HashEmbedder):
    """A HashEmbedder without a cache that records every text it encodes, so a test sees exactly
    what the ingest asked to embed."""

    def __init__(self, *, dim: int = 256) -> None:
        super().__init__(dim=dim, cache_size=0)
        self.encoded: list[str] = []
        self.calls = 0

    async def _encode(self, texts: list[str]) -> np.ndarray:
        self.encoded.extend(texts)
        self.calls += 1
        return await super()._encode(texts)


def words_text(n_paragraphs: int, *, tag: str = "w", sentences: int = 8, words: int = 12) -> str:
    """Paragraphs of sentences of distinct words (``w0 w1 ... w11.``): positions are readable."""
    k = 0
    paragraphs = []
    for _ in range(n_paragraphs):
        parts = []
        for _ in range(sentences):
            parts.append(" ".join(f"{tag}{k + i}" for i in range(words)) + ".")
            k += words
        paragraphs.append(" ".join(parts))
    return "\n\n".join(paragraphs)


def _pdf_string(text: str) -> str:
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def make_pdf(pages: list[list[str]], *, title: str | None = None) -> bytes:
    """A minimal PDF written by hand: one Helvetica text line per string, one page per list."""
    page_ids = [4 + 2 * i for i in range(len(pages))]
    objects: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: f"<< /Type /Pages /Kids [{' '.join(f'{p} 0 R' for p in page_ids)}] "
        f"/Count {len(pages)} >>".encode(),
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    }
    for page_id, lines in zip(page_ids, pages, strict=True):
        ops = ["BT", "/F1 11 Tf", "14 TL", "72 720 Td"]
        ops += [f"{_pdf_string(line)} Tj T*" for line in lines]
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        objects[page_id] = (
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {page_id + 1} 0 R "
            "/Resources << /Font << /F1 3 0 R >> >> >>"
        ).encode()
        objects[page_id + 1] = (
            f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream"
        )
    info_id = None
    if title is not None:
        info_id = max(objects) + 1
        objects[info_id] = f"<< /Title {_pdf_string(title)} >>".encode("latin-1")
    out = bytearray(b"%PDF-1.4\n")
    offsets = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += f"{number} 0 obj\n".encode() + objects[number] + b"\nendobj\n"
    xref = len(out)
    size = max(objects) + 1
    out += f"xref\n0 {size}\n0000000000 65535 f \n".encode()
    for number in range(1, size):
        out += f"{offsets[number]:010d} 00000 n \n".encode()
    trailer = f"<< /Size {size} /Root 1 0 R" + (f" /Info {info_id} 0 R" if info_id else "") + " >>"
    out += f"trailer\n{trailer}\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(path=tmp_path / "c.db") as opened:
        yield opened


@pytest.fixture
def write_character(tmp_path: Path) -> Callable[..., Character]:
    """Write a character YAML file under ``tmp_path/characters`` and load it (so paths in its
    knowledge list are relative to that folder)."""

    def write(knowledge: list[Any], *, name: str = "Harbor", **extra: Any) -> Character:
        folder = tmp_path / "characters"
        folder.mkdir(exist_ok=True)
        path = folder / f"{name.lower()}.yaml"
        data = {"name": name, "bio": [f"{name} is a helpful harbor guide."], **extra}
        data["knowledge"] = knowledge
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return load_character(path)

    return write
