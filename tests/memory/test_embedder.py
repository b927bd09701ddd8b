"""The Embedder base (cache, de-duplication, normalization) and the HashEmbedder fake."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from carrier.memory.embedder import TURN_BATCH, Embedder
from carrier.memory.fake import HashEmbedder


class CountingEmbedder(HashEmbedder):
    """A HashEmbedder that records every batch the base class asks it to encode."""

    def __init__(self, *, max_batch: int = 64, **kwargs: int) -> None:
        super().__init__(**kwargs)
        self.max_batch = max_batch
        self.batches: list[list[str]] = []

    async def _encode(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return await super()._encode(texts)


class ScaledEmbedder(Embedder):
    """Returns unnormalized vectors, to check that the base class normalizes."""

    name = "scaled"
    dim = 2

    async def _encode(self, texts: list[str]) -> np.ndarray:
        return np.array([[3.0 * len(t), 4.0 * len(t)] for t in texts])


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


async def test_embedder_hash_is_deterministic_and_normalized() -> None:
    one, two = HashEmbedder(), HashEmbedder()
    vectors = await one.embed(["Hello there", "Something else entirely"])
    again = await two.embed(["Hello there", "Something else entirely"])

    assert vectors.shape == (2, 256)
    assert vectors.dtype == np.float32
    assert np.array_equal(vectors, again)
    assert np.linalg.norm(vectors, axis=1) == pytest.approx([1.0, 1.0], abs=1e-6)
    assert one.model_id == "hash:256"


async def test_embedder_hash_shared_words_score_higher() -> None:
    embedder = HashEmbedder()
    query = await embedder.embed_one("How do I reset my password?")
    related = await embedder.embed_one("I forgot my password")
    unrelated = await embedder.embed_one("The weather is nice")
    assert _cosine(query, related) > _cosine(query, unrelated) + 0.2
    assert _cosine(query, await embedder.embed_one("how do i RESET my password")) > 0.99


async def test_embedder_hash_dim_is_configurable() -> None:
    embedder = HashEmbedder(dim=32)
    assert (await embedder.embed(["a b c"])).shape == (1, 32)
    assert embedder.model_id == "hash:32"


async def test_embedder_empty_input_and_empty_text() -> None:
    embedder = HashEmbedder()
    empty = await embedder.embed([])
    assert empty.shape == (0, 256)
    assert empty.dtype == np.float32
    assert not (await embedder.embed_one("")).any()  # no words: the zero vector, not NaN


async def test_embedder_rejects_a_bare_string() -> None:
    with pytest.raises(TypeError, match="embed_one"):
        await HashEmbedder().embed("not a list")


async def test_embedder_base_normalizes_rows() -> None:
    vectors = await ScaledEmbedder().embed(["ab", "abcd"])
    np.testing.assert_allclose(vectors, [[0.6, 0.8], [0.6, 0.8]], rtol=1e-6)
    assert vectors.dtype == np.float32


async def test_embedder_cache_encodes_each_distinct_text_once() -> None:
    embedder = CountingEmbedder()
    first = await embedder.embed(["a", "b", "a", "c", "b"])
    assert embedder.batches == [["a", "b", "c"]]
    assert np.array_equal(first[0], first[2])

    second = await embedder.embed(["c", "d", "a"])
    assert embedder.batches == [["a", "b", "c"], ["d"]]
    assert np.array_equal(second[0], first[3])
    assert np.array_equal(second[2], first[0])

    await embedder.embed(["a", "b", "c", "d"])
    assert len(embedder.batches) == 2  # all hits: nothing encoded


async def test_embedder_results_are_copies_of_the_cache() -> None:
    embedder = CountingEmbedder()
    vector = await embedder.embed_one("x")
    vector[:] = 0.0
    assert (await embedder.embed_one("x")).any()
    assert len(embedder.batches) == 1


async def test_embedder_cache_is_bounded_lru() -> None:
    embedder = CountingEmbedder(cache_size=2)
    await embedder.embed(["a", "b"])
    await embedder.embed(["a"])  # a is now the most recent
    await embedder.embed(["c"])  # evicts b
    await embedder.embed(["a", "c"])
    assert embedder.batches == [["a", "b"], ["c"]]
    await embedder.embed(["b"])
    assert embedder.batches[-1] == ["b"]

    big = CountingEmbedder(cache_size=2)
    vectors = await big.embed(["p", "q", "r", "p"])  # more misses than the cache holds
    assert np.array_equal(vectors[0], vectors[3])


async def test_embedder_cache_can_be_disabled_and_cleared() -> None:
    off = CountingEmbedder(cache_size=0)
    await off.embed(["a"])
    await off.embed(["a"])
    assert off.batches == [["a"], ["a"]]

    on = CountingEmbedder()
    await on.embed(["a"])
    on.clear_cache()
    await on.embed(["a"])
    assert on.batches == [["a"], ["a"]]


async def test_embedder_concurrent_calls_agree() -> None:
    embedder = HashEmbedder()
    results = await asyncio.gather(*(embedder.embed([f"t{i % 5}", "shared"]) for i in range(20)))
    for i, result in enumerate(results):
        assert np.array_equal(result[1], results[0][1])
        assert np.array_equal(result[0], results[i % 5][0])


async def test_embedder_wrong_shape_from_encode_is_reported() -> None:
    class Broken(HashEmbedder):
        async def _encode(self, texts: list[str]) -> np.ndarray:
            return np.zeros((len(texts), 3))

    with pytest.raises(ValueError, match=r"Broken\._encode returned shape"):
        await Broken().embed(["x"])


# -- micro-batching ----------------------------------------------------------------------------


async def test_embedder_concurrent_calls_share_model_batches() -> None:
    embedder = CountingEmbedder()
    texts = [f"turn number {i}" for i in range(TURN_BATCH)]
    results = await asyncio.gather(*(embedder.embed_one(t) for t in texts))

    assert len(embedder.batches) == 1  # concurrent calls: one model call
    assert sorted(embedder.batches[0]) == sorted(texts)
    alone = await HashEmbedder().embed(texts)
    for got, want in zip(results, alone, strict=True):
        assert np.array_equal(got, want)  # identical to unbatched


async def test_embedder_batches_are_bounded_and_requests_queue_behind_a_running_one() -> None:
    embedder = CountingEmbedder(max_batch=16)
    results = await asyncio.gather(*(embedder.embed_one(f"t{i}") for i in range(40)))
    assert [len(b) for b in embedder.batches] == [16, 16, 8]
    assert len({r.tobytes() for r in results}) == 40

    gate = asyncio.Event()

    class Gated(CountingEmbedder):
        async def _encode(self, texts: list[str]) -> np.ndarray:
            await gate.wait()
            return await super()._encode(texts)

    gated = Gated()
    first = asyncio.create_task(gated.embed_one("first"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the first batch is running, waiting at the gate
    later = [asyncio.create_task(gated.embed_one(f"later {i}")) for i in range(10)]
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(first, *later)
    assert [len(b) for b in gated.batches] == [1, 10]


async def test_embedder_turns_texts_go_in_short_batches_and_bulk_in_long_ones() -> None:
    """A turn's text waits for its whole batch: turns' texts go TURN_BATCH at a time (the
    model's rate is the same), a document's chunks max_batch at a time."""
    embedder = CountingEmbedder(max_batch=64)
    await asyncio.gather(*(embedder.embed_one(f"message {i}") for i in range(40)))
    assert [len(b) for b in embedder.batches] == [TURN_BATCH, TURN_BATCH, 40 - 2 * TURN_BATCH]
    embedder.batches.clear()
    await embedder.embed([f"chunk {i}" for i in range(100)])
    assert [len(b) for b in embedder.batches] == [64, 36]


async def test_embedder_same_text_in_flight_is_encoded_once() -> None:
    embedder = CountingEmbedder()
    a, b, c = await asyncio.gather(
        embedder.embed(["x", "y"]), embedder.embed_one("x"), embedder.embed_one("y")
    )
    assert sorted(t for batch in embedder.batches for t in batch) == ["x", "y"]
    assert np.array_equal(a[0], b) and np.array_equal(a[1], c)


async def test_embedder_small_requests_go_before_bulk_ones() -> None:
    embedder = CountingEmbedder(max_batch=8)
    bulk = [f"document chunk {i}" for i in range(24)]
    await asyncio.gather(embedder.embed(bulk), embedder.embed_one("hello there"))
    assert embedder.batches[0][0] == "hello there"


async def test_embedder_bulk_batches_group_texts_of_similar_length() -> None:
    # A batch is padded to its longest text: bulk texts are batched with others of their length.
    embedder = CountingEmbedder(max_batch=4)
    texts = [("w " * (1 + 20 * (i % 2))).strip() + f" {i}" for i in range(16)]  # short, long, ...
    vectors = await embedder.embed(texts)

    assert sorted(t for b in embedder.batches for t in b) == sorted(texts)  # each once
    assert all(len(b) == 4 for b in embedder.batches)
    for batch in embedder.batches:  # all short or all long, never mixed
        assert len({len(t) > 20 for t in batch}) == 1
    assert embedder.batches[0][0] == texts[0]  # the oldest waiting text always goes first
    alone = await HashEmbedder().embed(texts)
    assert np.array_equal(vectors, alone)  # results in the caller's order


async def test_embedder_errors_reach_every_caller_of_the_batch_and_later_calls_work() -> None:
    class Failing(CountingEmbedder):
        fail = True

        async def _encode(self, texts: list[str]) -> np.ndarray:
            if self.fail:
                raise RuntimeError("model crashed")
            return await super()._encode(texts)

    embedder = Failing()
    results = await asyncio.gather(
        *(embedder.embed_one(f"t{i}") for i in range(5)), return_exceptions=True
    )
    assert all(isinstance(r, RuntimeError) for r in results)
    embedder.fail = False
    assert (await embedder.embed_one("t1")).shape == (256,)


async def test_embedder_a_cancelled_caller_does_not_cancel_the_others() -> None:
    gate = asyncio.Event()

    class Gated(CountingEmbedder):
        async def _encode(self, texts: list[str]) -> np.ndarray:
            await gate.wait()
            return await super()._encode(texts)

    embedder = Gated()
    a = asyncio.create_task(embedder.embed_one("shared"))
    b = asyncio.create_task(embedder.embed_one("shared"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    a.cancel()
    gate.set()
    assert (await b).shape == (256,)
    with pytest.raises(asyncio.CancelledError):
        await a


def test_embedder_max_batch_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        ScaledEmbedder(max_batch=0)
