"""carrier.knowledge's public names, and that importing it (or its CLI) stays light."""

from __future__ import annotations

import subprocess
import sys

import carrier.knowledge


def test_knowledge_exports_the_documented_names() -> None:
    assert set(carrier.knowledge.__all__) == {
        "SUPPORTED_SUFFIXES",
        "Chunking",
        "KnowledgeDocument",
        "KnowledgeError",
        "KnowledgeProgress",
        "KnowledgeReport",
        "add_knowledge",
        "chunk_text",
        "knowledge_room_id",
        "list_knowledge",
        "remove_knowledge",
        "sync_character_knowledge",
        "sync_knowledge",
    }


def test_knowledge_import_does_not_load_torch_or_pypdf() -> None:
    code = (
        "import sys, carrier.knowledge, carrier.cli.knowledge\n"
        "heavy = {'torch', 'sentence_transformers', 'pypdf', 'litellm'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
