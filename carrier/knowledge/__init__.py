"""Knowledge: documents an agent knows (a character's ``knowledge`` list, files and folders added
with ``carrier knowledge add``), chunked, embedded once and recalled into prompts.

See :mod:`carrier.knowledge.manage` for how documents are tracked and who manages them.
"""

from carrier.knowledge.chunking import Chunking, chunk_text
from carrier.knowledge.index import KnowledgeDocument, knowledge_room_id
from carrier.knowledge.manage import (
    add_knowledge,
    list_knowledge,
    remove_knowledge,
    sync_character_knowledge,
    sync_knowledge,
)
from carrier.knowledge.report import KnowledgeProgress, KnowledgeReport
from carrier.knowledge.sources import SUPPORTED_SUFFIXES, KnowledgeError

__all__ = [
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
]
