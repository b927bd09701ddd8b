"""Keep an agent's knowledge in line with its character file, add and remove documents by hand,
and list what it knows.

    report = await sync_knowledge(store, embedder, agent_id=c.agent_id, character=c)
    print(report.summary())   # 2 added, 0 updated, 0 removed, 5 unchanged document(s); ...

Documents are cut into chunks (:mod:`carrier.knowledge.chunking`), embedded in batches and stored
as ``kind=knowledge`` memories in the agent's knowledge room, which the ``knowledge`` context
provider recalls by similarity into prompts. A document is read again only when its bytes change
(sha256), and only the chunks whose text changed are embedded again.

Who manages what: documents the character lists (``origin="character"``) follow the character
file: :func:`sync_knowledge` adds, updates and forgets them. Documents added with
:func:`add_knowledge` (``origin="cli"``, named by absolute path) stay until
:func:`remove_knowledge`, or until they vanish from a folder added again.

``shared`` is recorded, but each agent keeps its own copy of a shared document, because recall
searches one agent's memories; agents in one process embed a shared document once (the embedder
caches vectors by text).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from carrier.errors import UserError
from carrier.knowledge._ingest import DEFAULT_BATCH_SIZE, Ingest
from carrier.knowledge.chunking import Chunking
from carrier.knowledge.index import KnowledgeDocument, load_index, save_index
from carrier.knowledge.report import KnowledgeProgress, KnowledgeReport
from carrier.knowledge.sources import character_sources, path_sources
from carrier.memory.base import Store
from carrier.memory.embedder import Embedder

__all__ = [
    "add_knowledge",
    "list_knowledge",
    "remove_knowledge",
    "sync_character_knowledge",
    "sync_knowledge",
]

log = logging.getLogger(__name__)


async def sync_knowledge(
    store: Store,
    embedder: Embedder,
    *,
    agent_id: str,
    character: Any,
    progress: KnowledgeProgress | None = None,
    chunking: Chunking | None = None,
    base_dir: Path | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> KnowledgeReport:
    """Make the agent's stored knowledge match ``character.knowledge``: new and changed documents
    are ingested, documents no longer listed are forgotten, unchanged ones are only hashed.

    Paths are relative to ``base_dir``, by default the character file's folder. A missing path
    raises :class:`~carrier.errors.CharacterError` (naming the character file and the path) before
    anything is changed; a document that exists but cannot be read is reported in
    ``report.failed`` and what was known of it is kept.
    """
    found = await asyncio.to_thread(character_sources, character, base_dir=base_dir)
    run = Ingest(
        store=store,
        embedder=embedder,
        agent_id=agent_id,
        chunking=chunking,
        batch_size=batch_size,
        progress=progress,
    )
    return await run.run(
        found.refs, removable=lambda doc: doc.origin == "character", skipped=found.skipped
    )


async def sync_character_knowledge(
    store: Store,
    embedder: Embedder,
    character: Any,
    *,
    progress: KnowledgeProgress | None = None,
) -> KnowledgeReport:
    """:func:`sync_knowledge` for start-up: a mistake in the character's knowledge list is logged
    and returned in ``report.error`` (the agent keeps what it knew and starts anyway); runtime
    failures (store, embedder) still raise."""
    name = getattr(character, "name", "?")
    try:
        report = await sync_knowledge(
            store, embedder, agent_id=character.agent_id, character=character, progress=progress
        )
    except UserError as exc:
        log.warning("%s: knowledge not synced, keeping what was known: %s", name, exc)
        return KnowledgeReport(error=str(exc))
    if report.changed or report.failed:
        log.info("%s: knowledge: %s", name, report.summary())
    return report


async def add_knowledge(
    store: Store,
    embedder: Embedder,
    *,
    agent_id: str,
    paths: Iterable[str | Path],
    shared: bool = False,
    progress: KnowledgeProgress | None = None,
    chunking: Chunking | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> KnowledgeReport:
    """Ingest files and folders (``.txt``, ``.md``, ``.pdf``; folders recursively) for the agent,
    named by absolute path. Adding a folder again updates changed files and forgets files that
    left it. A missing or unsupported path raises :class:`KnowledgeError` before anything is
    changed."""
    found = await asyncio.to_thread(path_sources, list(paths), shared=shared)

    def removable(doc: KnowledgeDocument) -> bool:
        return doc.origin == "cli" and any(doc.source.startswith(f"{f}/") for f in found.folders)

    run = Ingest(
        store=store,
        embedder=embedder,
        agent_id=agent_id,
        chunking=chunking,
        batch_size=batch_size,
        progress=progress,
    )
    return await run.run(found.refs, removable=removable, skipped=found.skipped)


async def list_knowledge(store: Store, agent_id: str) -> list[KnowledgeDocument]:
    """The agent's documents, sorted by source id."""
    index = await load_index(store, agent_id)
    return [index[source] for source in sorted(index)]


async def remove_knowledge(store: Store, agent_id: str, source: str) -> list[KnowledgeDocument]:
    """Forget a document (by source id) or every document under a folder (a source id prefix);
    returns what was forgotten. A document the character still lists comes back at its next
    sync."""
    index = await load_index(store, agent_id)
    prefix = source.rstrip("/") + "/"
    gone = [doc for name, doc in sorted(index.items()) if name == source or name.startswith(prefix)]
    for doc in gone:
        for cid in doc.chunk_ids(agent_id):
            await store.delete_memory(cid)
        del index[doc.source]
    if gone:
        await save_index(store, agent_id, index)
    return gone
