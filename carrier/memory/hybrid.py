"""Hybrid search: full-text and vector rankings fused by reciprocal rank fusion.

Each store ranks candidates twice, by full-text relevance (SQLite FTS5 bm25, MongoDB ``$text``)
and by cosine similarity, and :func:`reciprocal_rank_fusion` merges the two lists: a memory's
fused score is ``sum(1 / (k + rank))`` over the lists it appears in (rank from 1, ``k = 60`` as in
Cormack et al., 2009). Rank fusion needs no score calibration between bm25 and cosine, and a memory
that only one side finds (a rare name the embedding blurs, a paraphrase with no shared word) still
ranks well.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = [
    "RRF_K",
    "candidate_count",
    "fts5_query",
    "query_terms",
    "reciprocal_rank_fusion",
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


def fts5_query(text: str) -> str | None:
    """An FTS5 MATCH expression that finds rows with any of the words of ``text`` (each word
    quoted, so no user text is read as query syntax); None when ``text`` has no words."""
    terms = query_terms(text)
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


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
