"""carrier.memory's public names, and that importing it stays light."""

from __future__ import annotations

import subprocess
import sys

import carrier.memory


def test_memory_exports_the_documented_names() -> None:
    assert set(carrier.memory.__all__) == {
        "Embedder",
        "HashEmbedder",
        "SQLiteStore",
        "SentenceTransformerEmbedder",
        "Store",
    }
    from carrier.memory.sentence import SentenceTransformerEmbedder

    assert carrier.memory.SentenceTransformerEmbedder is SentenceTransformerEmbedder


def test_memory_import_does_not_load_torch() -> None:
    code = (
        "import sys, carrier.memory\n"
        "heavy = {'torch', 'sentence_transformers', 'transformers'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
