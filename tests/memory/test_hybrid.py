"""Reciprocal rank fusion and the full-text query built from user text."""

from __future__ import annotations

import pytest

from carrier.memory.hybrid import fts5_query, query_terms, reciprocal_rank_fusion


def test_hybrid_rrf_scores_and_order() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "d"]])
    scores = dict(fused)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["a"] == pytest.approx(1 / 61)
    assert [item for item, _ in fused] == ["c", "a", "b", "d"]  # a before d: ties by appearance
    assert reciprocal_rank_fusion([["a", "b"]], limit=1) == [("a", pytest.approx(1 / 61))]
    assert reciprocal_rank_fusion([[], []]) == []
    assert dict(reciprocal_rank_fusion([["a", "a", "b"]]))["b"] == pytest.approx(1 / 62)


def test_hybrid_query_terms_drop_stopwords_unless_nothing_is_left() -> None:
    assert query_terms("What is the Zanzibar ferry? the FERRY!") == ["zanzibar", "ferry"]
    assert query_terms("what is it") == ["what", "is", "it"]
    assert query_terms("...") == []
    assert len(query_terms(" ".join(f"w{i}" for i in range(100)))) == 32


def test_hybrid_fts5_query_quotes_every_term() -> None:
    assert fts5_query('he said "NEAR(a b)" OR x*') == '"said" OR "near" OR "b" OR "x"'
    assert fts5_query("") is None
    assert fts5_query("café crème") == '"café" OR "crème"'
