"""Chunking: sizes, overlap, boundaries, short tails, short documents, determinism."""

from __future__ import annotations

import itertools
import re

import pytest

from carrier.knowledge import Chunking, chunk_text
from tests.knowledge.conftest import words_text


def positions(chunk: str) -> list[int]:
    """Word numbers of a chunk of ``words_text`` (``w17`` → 17)."""
    return [int(w) for w in re.findall(r"w(\d+)", chunk)]


def test_chunking_default_sizes_and_overlap_on_a_long_document() -> None:
    text = words_text(40)  # 40 paragraphs of 96 words: 3840 words
    chunks = chunk_text(text)
    spans = [positions(c) for c in chunks]
    assert len(chunks) > 4
    for span in spans:
        assert span == list(range(span[0], span[-1] + 1))  # contiguous slices of the text
        assert 50 <= len(span) <= 800
    for before, after in itertools.pairwise(spans):
        overlap = before[-1] - after[0] + 1
        assert 60 <= overlap <= 180  # about 15 % of 800 words, moved to a sentence start
        assert after[0] % 12 == 0  # the next chunk starts at a sentence start
    assert spans[0][0] == 0 and spans[-1][-1] == 3839  # nothing lost at either end


def test_chunking_prefers_paragraph_then_sentence_boundaries() -> None:
    chunks = chunk_text(words_text(40))
    # Paragraphs are 96 words: every chunk but the last ends at the end of a paragraph.
    for chunk in chunks[:-1]:
        assert (positions(chunk)[-1] + 1) % 96 == 0
        assert chunk.endswith(".")
    # One long paragraph: chunks end at sentence ends (every 12 words) instead.
    one_paragraph = " ".join(words_text(40).split())
    for chunk in chunk_text(one_paragraph)[:-1]:
        assert (positions(chunk)[-1] + 1) % 12 == 0


def test_chunking_cuts_unbroken_text_at_exactly_the_size() -> None:
    text = " ".join(f"w{i}" for i in range(2000))  # no sentence or paragraph ends at all
    spans = [positions(c) for c in chunk_text(text)]
    assert [len(s) for s in spans[:-1]] == [800] * (len(spans) - 1)
    assert spans[1][0] == 800 - 120  # 15 % overlap, in words


def test_chunking_short_tail_is_merged_into_the_previous_chunk() -> None:
    text = " ".join(f"w{i}" for i in range(830))  # 30 words past one chunk: under min_words
    assert chunk_text(text) == [text]
    longer = " ".join(f"w{i}" for i in range(900))  # 100 words past: a chunk of its own
    spans = [positions(c) for c in chunk_text(longer)]
    assert [len(s) for s in spans] == [800, 220]
    assert spans[1][-1] == 899


def test_chunking_no_chunk_under_min_words_unless_the_document_is() -> None:
    c = Chunking(words=20, overlap=0.15, min_words=5)
    for n in range(1, 120):
        text = " ".join(f"w{i}" for i in range(n))
        lengths = [len(positions(x)) for x in chunk_text(text, c)]
        if n <= 20:
            assert lengths == [n]
        else:
            assert all(5 <= length <= 24 for length in lengths), (n, lengths)
            assert positions(chunk_text(text, c)[-1])[-1] == n - 1


def test_chunking_short_and_blank_documents() -> None:
    assert chunk_text("") == []
    assert chunk_text("  \n\n \t ") == []
    assert chunk_text("  The harbor opens at dawn.  \n") == ["The harbor opens at dawn."]


def test_chunking_keeps_the_original_text_and_is_deterministic() -> None:
    text = "# Title\n\nFirst line of a list:\n- one\n- two\n\n" + words_text(12)
    first = chunk_text(text)
    assert first == chunk_text(text)
    assert first[0].startswith("# Title\n\nFirst line of a list:\n- one\n- two")
    assert all(chunk in text for chunk in first)


def test_chunking_signature_names_the_parameters() -> None:
    assert Chunking().signature == "words=800,overlap=120,min=50,embed=150"
    with pytest.raises(ValueError, match="overlap"):
        Chunking(overlap=0.9)
    with pytest.raises(ValueError, match="min_words"):
        Chunking(words=10, min_words=20)


def test_chunking_embedding_parts_cover_a_long_chunk_in_windows() -> None:
    c = Chunking(embed_words=150)
    words = [f"w{i}" for i in range(800)]
    parts = c.embedding_parts(" ".join(words))
    assert [len(p.split()) for p in parts] == [150, 150, 150, 150, 200]  # a 50-word tail joins
    assert " ".join(parts).split() == words  # every word, in order, once
    assert c.embedding_parts("short text") == ["short text"]
    assert Chunking(embed_words=0).embedding_parts(" ".join(words)) == [" ".join(words)]
    assert [len(p.split()) for p in c.embedding_parts(" ".join(words[:400]))] == [150, 150, 100]
