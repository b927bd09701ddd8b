"""Hybrid search: full-text and vector rankings fused by reciprocal rank fusion.

Each store ranks candidates twice, by full-text relevance (SQLite FTS5 bm25, MongoDB ``$text``)
and by cosine similarity, and :func:`reciprocal_rank_fusion` merges the two lists: a memory's
fused score is ``sum(1 / (k + rank))`` over the lists it appears in (rank from 1, ``k = 60`` as in
Cormack et al., 2009). Rank fusion needs no score calibration between bm25 and cosine, and a memory
that only one side finds (a rare name the embedding blurs, a paraphrase with no shared word) still
ranks well.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence

import numpy as np

from carrier.types import ScoredMemory

__all__ = [
    "POSTINGS_BUDGET",
    "RARE_TERMS",
    "RRF_K",
    "candidate_count",
    "folded",
    "fts5_match",
    "query_terms",
    "rarest_terms",
    "reciprocal_rank_fusion",
    "relevant",
    "relevant_hits",
]

RRF_K = 60

_WORD = re.compile(r"\w+", re.UNICODE)
_MAX_TERMS = 32
# Words so common that matching them costs more than it tells (bm25 weights them near zero).
_STOPWORDS = (
    "a an and are as at be but by do does did for from had has have he her his how i if in into "
    "is it its me my no not of on or our she so than that the their them then there these they "
    "this to too us was we were what when where which who why will with you your"
)
STOPWORDS = frozenset(_STOPWORDS.split())


def query_terms(text: str) -> list[str]:
    """Distinct lower-case words of ``text`` to search for, stopwords dropped unless that leaves
    none; at most 32."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    kept = [w for w in words if w not in STOPWORDS] or words
    return kept[:_MAX_TERMS]


RARE_TERMS = 4
"""How many of a query's words the full-text side searches for at most: the rarest ones."""
POSTINGS_BUDGET = 3_000
"""How many memories, summed over the words searched, the full-text side may match: reading and
ranking postings costs about a microsecond each, and a word held by more memories than that tells
bm25 little (those words are left to the vector side)."""


def rarest_terms(doc_counts: dict[str, int]) -> list[str]:
    """The words worth a full-text search, given in how many memories each occurs: those that
    occur at all, rarest first, at most :data:`RARE_TERMS` of them, while their counts add up to
    no more than :data:`POSTINGS_BUDGET` (none, when even the rarest is more common than that)."""
    kept: list[str] = []
    total = 0
    for count, term in sorted((c, t) for t, c in doc_counts.items() if c > 0):
        if len(kept) == RARE_TERMS or total + count > POSTINGS_BUDGET:
            break
        kept.append(term)
        total += count
    return kept


def folded(term: str) -> str:
    """``term`` as FTS5's ``unicode61 remove_diacritics 2`` tokenizer indexes it (``café`` →
    ``cafe``), to look it up in the index's vocabulary."""
    decomposed = unicodedata.normalize("NFKD", term)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def fts5_match(terms: Sequence[str]) -> str | None:
    """An FTS5 MATCH expression for rows with any of ``terms`` (each quoted); None for none."""
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def relevant(
    hit: ScoredMemory,
    terms: Sequence[str],
    *,
    min_cosine: float,
    query: Sequence[float] = (),
) -> bool:
    """Whether a hybrid search hit is worth showing: its vector is at least ``min_cosine`` from
    the query's, or its text holds one of the query's ``terms`` (:func:`query_terms`). Fused
    scores rank; they say nothing about relevance on their own. The cosine is the one the
    search measured (``hit.similarity``); for a hit only the text side found, it is measured
    here from the memory's vector and ``query`` when the memory came with its vector (a search
    with ``embeddings=False`` leaves such a hit to its words)."""
    similarity = hit.similarity
    memory = hit.memory
    if similarity is None and memory.embedding is not None and len(memory.embedding) == len(query):
        vector = np.asarray(memory.embedding, dtype=np.float32)
        q = np.asarray(query, dtype=np.float32)
        norms = float(np.linalg.norm(vector) * np.linalg.norm(q))
        similarity = float(vector @ q) / norms if norms > 0 else None
    if similarity is not None and similarity >= min_cosine:
        return True
    if not terms:
        return False
    wanted = _folded_set(tuple(terms))
    text = (memory.content.text or "").lower()
    if not text.isascii():
        text = folded(text)  # once for the whole text: a knowledge fragment is ~800 words
    return any(word in wanted for word in _WORD.findall(text))


def relevant_hits(
    hits: Iterable[ScoredMemory],
    text: str,
    *,
    min_cosine: float,
    query: Sequence[float] = (),
) -> list[ScoredMemory]:
    """The ``hits`` of a search for ``text`` that are :func:`relevant`, in their order."""
    terms = query_terms(text)
    return [hit for hit in hits if relevant(hit, terms, min_cosine=min_cosine, query=query)]


@functools.lru_cache(maxsize=256)
def _folded_set(terms: tuple[str, ...]) -> frozenset[str]:
    """``terms`` as the index has them (a search tests several hits against the same ones)."""
    return frozenset(folded(term) for term in terms)


def candidate_count(k: int) -> int:
    """How many candidates each side ranks for a fused top ``k``."""
    return max(4 * k, 50)


def reciprocal_rank_fusion(
    rankings: Iterable[Sequence[str]], *, k: int = RRF_K, limit: int | None = None
) -> list[tuple[str, float]]:
    """Ids and fused scores, best first; ties keep the order of first appearance."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(dict.fromkeys(ranking), start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    fused = sorted(scores.items(), key=lambda pair: -pair[1])  # stable: ties by first appearance
    return fused if limit is None else fused[:limit]
