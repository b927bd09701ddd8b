"""Reciprocal rank fusion and the full-text query built from user text."""

from __future__ import annotations

import pytest

from carrier.memory.hybrid import fts5_match, query_terms, reciprocal_rank_fusion


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


def fts5_query(text: str) -> str | None:
    return fts5_match(query_terms(text))


def test_hybrid_fts5_query_quotes_every_term() -> None:
    assert fts5_query('he said "NEAR(a b)" OR x*') == '"said" OR "near" OR "b" OR "x"'
    assert fts5_query("") is None
    assert fts5_query("café crème") == '"café" OR "crème"'


def test_hybrid_rarest_terms_keep_the_rare_words() -> None:
    from carrier.memory import hybrid

    counts = {"ferry": 3, "the": 90_000, "boat": 5_000, "zanzibar": 1, "missing": 0, "port": 40}
    assert hybrid.rarest_terms(counts) == ["zanzibar", "ferry", "port"]  # within the budget
    many = {f"w{i}": i + 1 for i in range(10)}
    assert hybrid.rarest_terms(many) == ["w0", "w1", "w2", "w3"]  # at most RARE_TERMS
    assert hybrid.rarest_terms({"the": 90_000, "boat": 12_000}) == []  # all common: vectors only
    assert hybrid.rarest_terms({"boat": 2_500, "sail": 400}) == ["sail", "boat"]
    assert hybrid.rarest_terms({"missing": 0}) == []
    assert hybrid.folded("café") == "cafe" and hybrid.folded("naïve") == "naive"


async def test_hybrid_sqlite_text_side_searches_the_rare_words(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from carrier.memory import hybrid
    from carrier.memory._ranked import MemoryQuery
    from carrier.memory.sqlite import SQLiteStore
    from carrier.types import Content, Memory

    monkeypatch.setattr(hybrid, "POSTINGS_BUDGET", 5)  # "lighthouse" (8 memories) is too common
    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        ids = {}
        for i in range(8):
            text = f"the lighthouse light number {i}" + (
                " and its keeper Café Ana" if i == 3 else ""
            )
            memory = await store.add_memory(
                Memory(agent_id="a", room_id="r", entity_id="e", content=Content(text=text))
            )
            ids[i] = memory.id
        query = MemoryQuery("a")
        assert await store._text_hits(query, "lighthouse keeper", 10) == [ids[3]]
        assert await store._text_hits(query, "the cafe keeper", 10) == [ids[3]]  # folded
        assert await store._text_hits(query, "lighthouse", 10) == []  # left to the vectors
        monkeypatch.setattr(hybrid, "POSTINGS_BUDGET", 3_000)
        assert sorted(await store._text_hits(query, "lighthouse", 10)) == sorted(ids.values())
        assert await store._text_hits(query, "nothing matches", 10) == []
        # A word looked up before any memory held it is found once one does.
        assert await store._text_hits(query, "zanzibar", 10) == []
        late = await store.add_memory(
            Memory(agent_id="a", room_id="r", entity_id="e", content=Content(text="Zanzibar"))
        )
        assert await store._text_hits(query, "zanzibar", 10) == [late.id]


def test_hybrid_relevant_needs_a_close_vector_or_a_shared_word() -> None:
    from carrier.memory.hybrid import relevant
    from carrier.types import Content, Memory, ScoredMemory

    def hit(text: str, vector: list[float] | None, similarity: float | None = None) -> ScoredMemory:
        memory = Memory(
            agent_id="a", room_id="r", entity_id="e", content=Content(text=text), embedding=vector
        )
        return ScoredMemory(memory=memory, score=0.01, similarity=similarity)

    query = [1.0, 0.0]
    far = [0.0, 1.0]
    q = {"query": query, "min_cosine": 0.3}
    assert relevant(hit("Ferry times to Zanzibar", far), ["zanzibar"], **q)
    assert relevant(hit("Café hours", far), ["cafe"], **q)  # folded
    assert relevant(hit("CAFE\u0301 hours", far), ["café"], **q)
    # Whole words only: a longer word that starts with the term is not a match.
    assert not relevant(hit("Zanzibarian ferries", far), ["zanzibar"], **q)
    assert not relevant(hit("Ferry times", far), ["zanzibar"], **q)
    # A hit only the text side found: its cosine is measured from its vector.
    assert relevant(hit("Ferry times", [0.8, 0.6]), ["zanzibar"], **q)
    assert not relevant(hit("Ferry times", [0.2, 0.98]), [], **q)
    # The cosine the search measured decides, with or without the vector.
    assert relevant(hit("Ferry times", None, similarity=0.31), ["zanzibar"], min_cosine=0.3)
    assert not relevant(hit("Ferry times", None, similarity=0.29), ["zanzibar"], min_cosine=0.3)
    assert not relevant(hit("Ferry times", [0.8, 0.6], similarity=0.1), [], **q)
    # Without a vector or a measured cosine, only the words can vouch for it.
    assert not relevant(hit("Ferry times", None), ["zanzibar"], **q)
    assert relevant(hit("Zanzibar ferry times", None), ["zanzibar"], **q)


async def test_hybrid_sqlite_knowledge_has_a_text_index_of_its_own(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from carrier.memory import hybrid
    from carrier.memory._ranked import MemoryQuery
    from carrier.memory.sqlite import SCHEMA_VERSION, SQLiteStore
    from carrier.types import Content, Memory, MemoryKind

    monkeypatch.setattr(hybrid, "POSTINGS_BUDGET", 5)
    path = tmp_path / "carrier.db"
    knowledge = MemoryQuery("a", kinds=[MemoryKind.KNOWLEDGE])

    def memory(text: str, kind: MemoryKind) -> Memory:
        return Memory(
            agent_id="a", room_id="r", entity_id="e", kind=kind, content=Content(text=text)
        )

    async with SQLiteStore(path=path) as store:
        # "ferry" is in eight messages (too common for the index of every memory) and one
        # fragment: rare among knowledge, so a knowledge search still looks for it.
        for i in range(8):
            await store.add_memory(memory(f"the ferry was late again {i}", MemoryKind.MESSAGE))
        fragment = await store.add_memory(memory("The ferry leaves at noon", MemoryKind.KNOWLEDGE))
        assert await store._text_hits(MemoryQuery("a"), "ferry", 10) == []
        assert await store._text_hits(knowledge, "ferry", 10) == [fragment.id]
        # Edits and deletes reach it (the triggers).
        fragment.content.text = "The boat leaves at noon"
        await store.update_memory(fragment)
        assert await store._text_hits(knowledge, "boat", 10) == [fragment.id]
        assert await store._text_hits(knowledge, "noon ferry", 10) == [fragment.id]  # noon
        assert await store._text_hits(knowledge, "ferry", 10) == []
        await store.delete_memory(fragment.id)
        assert await store._text_hits(knowledge, "boat", 10) == []
        kept = await store.add_memory(memory("Tickets are sold on board", MemoryKind.KNOWLEDGE))
        await store.catch_up()  # (step 8 is undone below: nothing may be left pending)

    # A file made before the index existed gets it filled with the knowledge it holds.
    with sqlite3.connect(path) as db:
        for name in ("knowledge_fts_insert", "knowledge_fts_delete", "knowledge_fts_update"):
            db.execute(f"DROP TRIGGER {name}")
        for name in (
            "memories_log_insert_unembedded",
            "memories_log_delete_unembedded",
            "knowledge_log_update",
        ):
            db.execute(f"DROP TRIGGER {name}")  # (step 7)
        db.execute("DROP TABLE memories_fts_pending")  # (step 8; its triggers are made anew)
        db.execute("DROP TABLE knowledge_vocab")
        db.execute("DROP TABLE knowledge_fts")
        db.execute("DELETE FROM schema_version WHERE version >= 6")
    async with SQLiteStore(path=path) as store:
        assert await store.schema_version() == SCHEMA_VERSION
        assert await store._text_hits(knowledge, "tickets", 10) == [kept.id]
        assert await store._text_hits(knowledge, "ferry late", 10) == []  # messages stay out


def _knowledge_fragment(text: str, embedding: list[float] | None = None):  # type: ignore[no-untyped-def]
    from carrier.types import Content, Memory, MemoryKind

    return Memory(
        agent_id="a",
        room_id="r",
        entity_id="e",
        kind=MemoryKind.KNOWLEDGE,
        content=Content(text=text),
        embedding=embedding,
        embedding_model="m" if embedding else None,
    )


def _spy_vocabulary_reads(store) -> list[object]:  # type: ignore[no-untyped-def]
    """What ``store`` reads of knowledge's vocabulary from here: ``"whole"`` for a read of all
    of it, else the words asked for."""
    reads: list[object] = []
    fetch, fetch_near = store._fetch, store._fetch_near

    async def spied(what: str, sql: str, params=(), *, near: bool):  # type: ignore[no-untyped-def]
        if "knowledge_vocab" in sql:
            reads.append("whole" if "LIMIT" in sql else list(params))
        return await (fetch_near if near else fetch)(what, sql, params)

    store._fetch = lambda *a: spied(*a, near=False)
    store._fetch_near = lambda *a: spied(*a, near=True)
    return reads


async def _knowledge_search(store, text: str):  # type: ignore[no-untyped-def]
    """The knowledge provider's search (4 fragments, 0.3 the least cosine) for a query
    vector of [1, 0]."""
    from carrier.types import MemoryKind

    return await store.search_hybrid(
        agent_id="a",
        text=text,
        embedding=[1.0, 0.0],
        embedding_model="m",
        k=4,
        kinds=[MemoryKind.KNOWLEDGE],
        embeddings=False,
        min_similarity=0.3,
    )


def _spy_hit_reads(store) -> list[list[str]]:  # type: ignore[no-untyped-def]
    """The ids of each batch of search hits ``store`` reads from here."""
    read: list[list[str]] = []
    scored = store._scored

    async def reading(hits, *, embeddings=True):  # type: ignore[no-untyped-def]
        read.append([memory_id for memory_id, _ in hits])
        return await scored(hits, embeddings=embeddings)

    store._scored = reading
    return read


async def test_hybrid_sqlite_knowledge_words_are_counted_anew_once_knowledge_changes(
    tmp_path,
) -> None:
    """Knowledge's whole vocabulary is read once and kept in memory, so a message's words,
    new ones included, cost no read; it is read again as soon as knowledge changes: a fragment
    added, edited or deleted, with or without a vector, by this store or by another process."""
    from carrier.memory._ranked import MemoryQuery
    from carrier.memory.sqlite import SQLiteStore
    from carrier.types import Content, Memory, MemoryKind

    path = tmp_path / "carrier.db"
    knowledge = MemoryQuery("a", kinds=[MemoryKind.KNOWLEDGE])
    fragment = _knowledge_fragment

    async with SQLiteStore(path=path) as store, SQLiteStore(path=path) as other:
        reads = _spy_vocabulary_reads(store)
        assert await store._text_hits(knowledge, "anchor lantern", 10) == []
        assert await store._text_hits(knowledge, "lantern anchor", 10) == []
        assert await store._text_hits(knowledge, "rope 1234 hull", 10) == []
        assert reads == ["whole"]  # once: the later searches, new words and all, read nothing

        # Added here, without a vector.
        anchor = await store.add_memory(fragment("Drop the anchor at dusk"))
        assert await store._text_hits(knowledge, "anchor", 10) == [anchor.id]
        # Added by another process (another store on the file), with a vector.
        lantern = await other.add_memory(fragment("The lantern hangs by the door", [1.0, 0.0]))
        assert await store._text_hits(knowledge, "lantern", 10) == [lantern.id]
        # Edited there under the same vector: the old word goes, the new one comes.
        lantern.content.text = "The lamp hangs by the door"
        await other.update_memory(lantern)
        assert await store._text_hits(knowledge, "lamp", 10) == [lantern.id]
        assert await store._text_hits(knowledge, "lantern", 10) == []
        assert reads == ["whole"] * 4  # a read for each change, none for the searches between
        # Deleted there: gone from the counts too (the text side is not asked for it).
        await other.delete_memory(anchor.id)
        reads.clear()
        assert await store._text_hits(knowledge, "anchor", 10) == []
        assert reads == ["whole"]
        assert await store._doc_counts("knowledge_vocab", ["anchor", "lamp"], store._fetch) == {
            "anchor": 0,
            "lamp": 1,
        }
        # Messages are no knowledge: their words leave the counts as they were.
        reads.clear()
        await other.add_memory(
            Memory(
                agent_id="a",
                room_id="r",
                entity_id="e",
                kind=MemoryKind.MESSAGE,
                content=Content(text="the anchor chain rattles"),
                embedding=[0.0, 1.0],
                embedding_model="m",
            )
        )
        assert await store._text_hits(knowledge, "anchor lamp", 10) == [lantern.id]
        assert reads == []


async def test_hybrid_sqlite_a_large_knowledge_vocabulary_is_read_word_by_word(
    tmp_path, monkeypatch
) -> None:
    """Past ``_KNOWLEDGE_WORDS`` words, knowledge's vocabulary is not kept whole: each word is
    read when a search first asks for it, the words knowledge lacks remembered too, until
    knowledge changes."""
    import carrier.memory._sqlite_search as search
    from carrier.memory._ranked import MemoryQuery
    from carrier.memory.sqlite import SQLiteStore
    from carrier.types import MemoryKind

    monkeypatch.setattr(search, "_KNOWLEDGE_WORDS", 3)
    knowledge = MemoryQuery("a", kinds=[MemoryKind.KNOWLEDGE])
    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        stern = await store.add_memory(_knowledge_fragment("Stern and bow and keel"))
        reads = _spy_vocabulary_reads(store)
        assert await store._text_hits(knowledge, "keel anchor", 10) == [stern.id]
        assert await store._text_hits(knowledge, "anchor keel", 10) == [stern.id]
        assert reads == ["whole", ["keel", "anchor"]]  # too many words: asked one by one, once
        assert await store._text_hits(knowledge, "stern gull", 10) == [stern.id]
        assert reads[2:] == [["stern", "gull"]]
        bow = await store.add_memory(_knowledge_fragment("A gull on the bow"))
        reads.clear()
        assert await store._text_hits(knowledge, "gull", 10) == [bow.id]
        assert reads == ["whole", ["gull"]]


async def test_hybrid_sqlite_searches_while_knowledge_vocabulary_is_read_count_right(
    tmp_path,
) -> None:
    """A search that arrives while another reads knowledge's whole vocabulary afresh does not
    take the counts of before (or none) for the new ones: it reads its own words."""
    import asyncio

    from carrier.memory._ranked import MemoryQuery
    from carrier.memory.sqlite import SQLiteStore
    from carrier.types import MemoryKind

    knowledge = MemoryQuery("a", kinds=[MemoryKind.KNOWLEDGE])
    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        await store.add_memory(_knowledge_fragment("Stern and bow"))
        assert await store._text_hits(knowledge, "keel", 10) == []  # counted: whole
        keel = await store.add_memory(_knowledge_fragment("The keel is long"))
        found = await asyncio.gather(
            *(store._text_hits(knowledge, text, 10) for text in ("keel", "long keel", "keel"))
        )
        assert found == [[keel.id]] * 3


async def test_hybrid_sqlite_far_knowledge_without_the_words_is_not_read(tmp_path) -> None:
    """Knowledge too far from a message that shares no word with any fragment is left out
    before its rows are read (a turn's usual knowledge search); with a shared word somewhere,
    the far fragments are read to see whether they hold it."""
    from carrier.memory.sqlite import SQLiteStore
    from carrier.types import Memory

    async with SQLiteStore(path=tmp_path / "carrier.db") as store:

        async def add(text: str, vector: list[float]) -> Memory:
            return await store.add_memory(_knowledge_fragment(text, vector))

        close = await add("Harbor opens at dawn", [1.0, 0.0])
        far = await add("The Zanzibar boat is late", [-1.0, 0.0])
        read = _spy_hit_reads(store)

        async def search(text: str) -> list[str]:
            return [h.memory.id for h in await _knowledge_search(store, text)]

        assert await search("quokka photos") == [close.id]
        assert read == [[close.id]]
        read.clear()
        assert await search("is the zanzibar ferry late") == [far.id, close.id]
        assert sorted(read[0]) == sorted([close.id, far.id])
        read.clear()
        assert await search("is the ferry on time") == [close.id]  # "is" is no word of theirs
        assert sorted(read[0]) == sorted([close.id])

        # A shared word the text side looked for: only the fragments holding it are read of
        # those too far to be shown.
        quiet = await add("Quiet waters all night", [-1.0, 0.0])
        read.clear()
        assert await search("zanzibar photos") == [far.id, close.id]
        assert sorted(read[0]) == sorted([close.id, far.id])  # not the quiet waters
        read.clear()
        assert sorted(await search("quiet zanzibar night")) == sorted([far.id, quiet.id, close.id])
        assert sorted(read[0]) == sorted([close.id, far.id, quiet.id])
        # More held words than the text side looks for: which fragments hold them is not
        # known, and every candidate is read (the quiet waters, holding none, not shown).
        read.clear()
        many = "harbor opens dawn zanzibar boat late"
        assert sorted(await search(many)) == sorted([close.id, far.id])
        assert sorted(read[0]) == sorted([close.id, far.id, quiet.id])


async def test_hybrid_sqlite_far_knowledge_is_read_when_the_text_side_may_have_missed_it(
    tmp_path, monkeypatch
) -> None:
    """When the text side found as many fragments as it may list, others may hold the words
    too: the far ones are read to see; with room to spare, only the ones it found are."""
    import carrier.memory._ranked as ranked
    from carrier.memory.sqlite import SQLiteStore

    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        ids = {}
        for name, text, vector in [
            ("harbor", "Harbor opens at dawn", [1.0, 0.0]),
            ("boat", "The Zanzibar boat is late", [-1.0, 0.0]),
            ("ferries", "Zanzibar ferries run at noon", [-0.9, 0.1]),
            ("quiet", "Quiet waters all night", [-0.5, -0.8]),
        ]:
            ids[name] = (await store.add_memory(_knowledge_fragment(text, vector))).id
        read = _spy_hit_reads(store)

        async def search(candidates: int) -> set[str]:
            monkeypatch.setattr(ranked, "candidate_count", lambda k: candidates)
            read.clear()
            return {h.memory.id for h in await _knowledge_search(store, "zanzibar")}

        shown = {ids["harbor"], ids["boat"], ids["ferries"]}
        # Two of each side: the text side's list is full, the quiet waters (far) are read.
        assert await search(2) == shown
        assert ids["quiet"] in read[0]
        # Three: the text side found both fragments with the word; the quiet waters are not read.
        assert await search(3) == shown
        assert sorted(read[0]) == sorted(shown)
