"""Search in the SQLite store: the three steps of a ranked search, by vector and by text.

:class:`~carrier.memory._ranked.RankedSearch` asks for the nearest vectors (from the in-memory
index once it is loaded and brought up to date from the change log; until then by scoring the
matching vectors read from the file), the memories best matching a text (an FTS5 table, searched
for the query's rarest words: knowledge has one of its own that triggers keep in step; the one of
every memory gets what was added in batches, :meth:`SQLiteSearch.catch_up`, before each search),
and the memories of a ranked list.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from carrier._sqlite_thread import immediate
from carrier.memory import _sqlite_codec as codec
from carrier.memory._ranked import MemoryQuery, RankedSearch, search_index
from carrier.memory._sqlite_changes import ChangeWatch
from carrier.memory.hybrid import folded, fts5_match, query_terms, rarest_terms
from carrier.memory.vector import cosine_top_k, from_blobs
from carrier.types import MemoryKind, ScoredMemory

__all__ = ["SQLiteSearch"]

_DOC_COUNT_TTL_S = 300.0
_DOC_COUNT_CACHE = 50_000
"""Words whose memory counts are kept (for :meth:`SQLiteSearch._doc_counts`), and for how long."""
_KNOWLEDGE_WORDS = 50_000
"""Knowledge's vocabulary is kept whole in memory up to this many words (~7 MB)."""
_INDEX_BATCH = 256
"""Memories added to the full-text index per transaction (see :meth:`SQLiteSearch.catch_up`):
~3.5 ms of the file's write lock (~14 us a memory, where one indexed in its own write cost
~65 us), which a turn's small write waits out at once (``_NEAR_TRIES``)."""
_NEAR_HITS = 64
"""Up to this many hits are read back on the event loop's thread (see ``_fetch_near``)."""
_KNOWLEDGE_ONLY = frozenset({MemoryKind.KNOWLEDGE})
"""Kinds whose text searches read an index of their own (``knowledge_fts``): a turn searches
knowledge alone, and the index of every memory would rank every message holding its words."""


class SQLiteSearch(RankedSearch, ChangeWatch):
    """``search_memories`` and ``search_hybrid`` over the SQLite file (a part of
    :class:`~carrier.memory.sqlite.SQLiteStore`)."""

    def __init__(self, *, path: str | Path, vector_index: bool = True) -> None:
        super().__init__(path=path, vector_index=vector_index)
        self._doc_count_cache: OrderedDict[tuple[str, str], tuple[int, float]] = OrderedDict()
        """(Vocabulary table, word) → (memories holding it, when read), for
        :meth:`_doc_counts`."""
        self._knowledge_counts: dict[str, int] = {}
        """Word → knowledge fragments holding it (0 too), as of :attr:`_knowledge_counted`."""
        self._knowledge_counted: tuple[int, ...] | None = None
        """The knowledge version (``_kinds_version``) the counts were read at."""
        self._knowledge_whole = False
        """Whether the counts are knowledge's whole vocabulary (a word not in them is in no
        fragment), not just the words asked for so far."""

    async def _vector_hits(
        self, query: MemoryQuery, embedding: Sequence[float], embedding_model: str, k: int
    ) -> list[tuple[str, float]]:
        """From the vector index when it is loaded, else from the vectors in the database."""
        if self.vectors is not None:
            await self._sync_vectors()
            found = await search_index(self.vectors, query, embedding, embedding_model, k)
            if found is not None:
                return found
        # Not loaded yet (or no index): score the matching vectors read from the database.
        dim = len(embedding)
        where, params = codec.query_filters(query)
        # Same model, same dimension: vectors of different models never meet.
        where += ["embedding_model = ?", "length(embedding) = ?"]
        params += [embedding_model, dim * 4]
        candidates = await self._fetch(
            "searching memories",
            f"SELECT id, embedding FROM memories WHERE {' AND '.join(where)}",
            params,
        )
        if not candidates:
            return []
        matrix = from_blobs((row["embedding"] for row in candidates), dim)
        indices, scores = cosine_top_k(embedding, matrix, k)
        return [
            (candidates[int(i)]["id"], float(score))
            for i, score in zip(indices, scores, strict=True)
        ]

    async def _scored(
        self, hits: Sequence[tuple[str, float]], *, embeddings: bool = True
    ) -> list[ScoredMemory]:
        if not hits:
            return []
        columns = codec.MEMORY_COLUMNS if embeddings else codec.MEMORY_COLUMNS_NO_VECTOR
        # A search's few hits are read at once (by primary key), many through the thread.
        fetch = self._fetch_near if len(hits) <= _NEAR_HITS else self._fetch
        rows = await fetch(
            "reading search results",
            f"SELECT {columns} FROM memories WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps([memory_id for memory_id, _ in hits]),),
        )
        by_id = {row["id"]: codec.memory_from_row(row) for row in rows}
        return [
            ScoredMemory(memory=by_id[memory_id], score=score)
            for memory_id, score in hits
            if memory_id in by_id
        ]

    async def _word_holders(
        self, query: MemoryQuery, text: str, by_text: Sequence[str], limit: int
    ) -> set[str] | None:
        """Known for knowledge, from its vocabulary kept in memory (:meth:`_doc_counts`): none
        when no fragment holds a word of the message (a turn's message mostly shares none with
        the character's knowledge), else the text side's hits when it looked for every word
        some fragment holds and found fewer than ``limit``. Then the fragments the vector is
        far from need not be read to learn whether they hold a word. Only for words FTS5 and
        :func:`~carrier.memory.hybrid.relevant` split alike (letters and digits)."""
        if query.kinds is None or not set(query.kinds) <= _KNOWLEDGE_ONLY:
            return None
        keys = {folded(term): term for term in query_terms(text)}
        if not all(key.isalnum() for key in keys):
            return None
        if not keys:
            return set()  # no words to hold
        version = await self._kinds_version(["knowledge"], deletes=True)
        if version is None:
            return None
        counts = await self._knowledge_doc_counts(version, list(keys), self._fetch_near)
        held = {keys[key]: counts[key] for key in keys if counts[key]}
        if not held:
            return set()
        # What _text_hits searched for: every held word, or only the rarest of them.
        if len(rarest_terms(held)) == len(held) and len(by_text) < limit:
            return set(by_text)
        return None

    async def _text_hits(self, query: MemoryQuery, text: str, limit: int) -> list[str]:
        """By FTS5 bm25, over the query's rarest words (see :func:`rarest_terms`); a search for
        knowledge alone reads knowledge's own index (see :data:`_KNOWLEDGE_ONLY`)."""
        terms = query_terms(text)
        if not terms:
            return []
        knowledge = query.kinds is not None and set(query.kinds) <= _KNOWLEDGE_ONLY
        fts, vocab = (
            ("knowledge_fts", "knowledge_vocab")
            if knowledge
            else ("memories_fts", "memories_vocab")
        )
        # Knowledge's own index is small: read at once; the index of every memory, on the thread,
        # once it holds every memory added so far.
        fetch = self._fetch_near if knowledge else self._fetch
        if not knowledge:
            await self.catch_up()
        keys = {folded(term): term for term in terms}
        counts = await self._doc_counts(vocab, list(keys), fetch)
        match = fts5_match(rarest_terms({keys[key]: counts[key] for key in keys}))
        if match is None:
            return []
        where, params = codec.query_filters(query, table="m.")
        rows = await fetch(
            "searching memories by text",
            f"""SELECT m.id FROM {fts} JOIN memories AS m ON m.seq = {fts}.rowid
            WHERE {fts} MATCH ? AND {" AND ".join(where)}
            ORDER BY bm25({fts}) LIMIT ?""",
            [match, *params, limit],
        )
        return [row[0] for row in rows]

    async def catch_up(self) -> int:
        """Add the memories added since the last batch to the full-text index of every memory
        (a write only notes them: see migration 8 in :mod:`carrier.memory._sqlite_schema`), in
        transactions of up to :data:`_INDEX_BATCH` on the connection's thread; returns how many.
        A text search of that index runs it first; the runtime runs it in the background after
        turns, so that searches seldom find anything left to do."""
        pending = await self._fetch_near(
            "looking for memories to index", "SELECT EXISTS (SELECT 1 FROM memories_fts_pending)"
        )
        if not pending[0][0]:
            return 0
        indexed = 0
        while True:
            done = await self._write_thread("indexing the text of memories", _index_pending)
            indexed += done
            if done < _INDEX_BATCH:
                return indexed

    async def _doc_counts(
        self,
        vocab: str,
        terms: list[str],
        fetch: Callable[[str, str, Sequence[Any]], Awaitable[list[sqlite3.Row]]],
    ) -> dict[str, int]:
        """In how many memories of the ``vocab`` table's index each (folded) term occurs.
        Looking a word up in FTS5's vocabulary costs ~0.6 ms, so counts are kept a while: they
        change slowly, and only choose which words a search looks for. Knowledge's are kept,
        words it lacks included, until knowledge changes (:meth:`_knowledge_doc_counts`)."""
        if vocab == "knowledge_vocab":
            version = await self._kinds_version(["knowledge"], deletes=True)
            if version is not None:
                return await self._knowledge_doc_counts(version, terms, fetch)
        now = time.monotonic()
        counts: dict[str, int] = {}
        missing = []
        for term in terms:
            known = self._doc_count_cache.get((vocab, term))
            if known is not None and now - known[1] < _DOC_COUNT_TTL_S:
                counts[term] = known[0]
            else:
                missing.append(term)
        if missing:
            found = await _vocabulary(vocab, missing, fetch)
            for term in missing:
                counts[term] = found.get(term, 0)
                if counts[term]:  # a word not seen yet may arrive any moment: asked again
                    self._doc_count_cache[(vocab, term)] = (counts[term], now)
                    self._doc_count_cache.move_to_end((vocab, term))
            while len(self._doc_count_cache) > _DOC_COUNT_CACHE:
                self._doc_count_cache.popitem(last=False)
        return counts

    async def _knowledge_doc_counts(
        self,
        version: tuple[int, ...],
        terms: list[str],
        fetch: Callable[[str, str, Sequence[Any]], Awaitable[list[sqlite3.Row]]],
    ) -> dict[str, int]:
        """Knowledge's counts of ``terms``, from memory while knowledge is as it was when they
        were read (``version``). Its whole vocabulary is read once per version, where it has
        at most :data:`_KNOWLEDGE_WORDS` words: a turn's message mostly brings a word or two
        nobody asked about before (a name, a number, a typo), each a lookup in FTS5's
        vocabulary otherwise (~0.1 ms in a turn). A larger vocabulary is read word by word,
        the words it lacks remembered too."""
        if version != self._knowledge_counted:
            self._knowledge_counts, self._knowledge_counted = {}, version
            self._knowledge_whole = False  # (a search meanwhile reads its words one by one)
            rows = await self._fetch(
                "reading knowledge's vocabulary",
                "SELECT term, doc FROM knowledge_vocab LIMIT ?",
                (_KNOWLEDGE_WORDS + 1,),
            )
            # Kept unless knowledge changed while this read (another search then reads again).
            if len(rows) <= _KNOWLEDGE_WORDS and self._knowledge_counted == version:
                self._knowledge_counts = {row[0]: int(row[1]) for row in rows}
                self._knowledge_whole = True
        known = self._knowledge_counts
        if self._knowledge_whole:
            return {term: known.get(term, 0) for term in terms}
        if len(known) > _DOC_COUNT_CACHE:
            known.clear()
        missing = [term for term in terms if term not in known]
        if missing:
            found = await _vocabulary("knowledge_vocab", missing, fetch)
            for term in missing:
                known[term] = found.get(term, 0)
        return {term: known[term] for term in terms}


def _index_pending(db: sqlite3.Connection) -> int:
    """One batch of :meth:`SQLiteSearch.catch_up`: the oldest pending memories, indexed and no
    longer pending, in one transaction; returns how many."""
    with immediate(db):
        count, last = db.execute(
            """SELECT count(*), max(seq) FROM
            (SELECT seq FROM memories_fts_pending ORDER BY seq LIMIT ?)""",
            (_INDEX_BATCH,),
        ).fetchone()
        if count:
            db.execute(
                """INSERT INTO memories_fts (rowid, text)
                SELECT m.seq, coalesce(json_extract(m.content, '$.text'), '')
                FROM memories_fts_pending AS p JOIN memories AS m ON m.seq = p.seq
                WHERE p.seq <= ?""",
                (last,),
            )
            db.execute("DELETE FROM memories_fts_pending WHERE seq <= ?", (last,))
    return int(count)


async def _vocabulary(
    vocab: str,
    terms: list[str],
    fetch: Callable[[str, str, Sequence[Any]], Awaitable[list[sqlite3.Row]]],
) -> dict[str, int]:
    """How many memories of the ``vocab`` table's index hold each of ``terms`` that any does."""
    rows = await fetch(
        "reading the full-text vocabulary",
        f"SELECT term, doc FROM {vocab} WHERE term IN ({', '.join('?' * len(terms))})",
        terms,
    )
    return {row[0]: int(row[1]) for row in rows}
