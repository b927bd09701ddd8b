"""The embedder as served: torch's intra-op threads from ``CARRIER_EMBED_THREADS`` (one by
default, as measured), and a warm-up encode at load so the first message pays no start-up
cost."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from carrier.errors import ConfigError
from carrier.memory.sentence import (
    DEFAULT_THREADS,
    THREADS_ENV,
    SentenceTransformerEmbedder,
    serving_threads,
)


def test_serving_threads_default_to_the_measured_one() -> None:
    assert DEFAULT_THREADS == 1
    assert serving_threads({}) == 1
    assert serving_threads({THREADS_ENV: " "}) == 1


def test_serving_threads_come_from_the_environment() -> None:
    assert serving_threads({THREADS_ENV: "2"}) == 2
    assert serving_threads({THREADS_ENV: "0"}) == 0  # torch's own default


@pytest.mark.parametrize("raw", ["two", "-1", "1.5"])
def test_a_bad_thread_count_says_how_to_fix_it(raw: str) -> None:
    with pytest.raises(ConfigError) as info:
        serving_threads({THREADS_ENV: raw})
    message = str(info.value)
    assert THREADS_ENV in message and repr(raw) in message and "whole number" in message


def test_the_embedder_reads_its_threads_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(THREADS_ENV, "2")
    assert SentenceTransformerEmbedder().threads == 2
    assert SentenceTransformerEmbedder(threads=0).threads == 0  # the argument wins
    monkeypatch.delenv(THREADS_ENV)
    assert SentenceTransformerEmbedder().threads == DEFAULT_THREADS
    with pytest.raises(ValueError, match="threads must be >= 0"):
        SentenceTransformerEmbedder(threads=-1)


class FakeModel:
    """Stands in for the SentenceTransformer: records what it was asked to encode."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str], **_: Any) -> np.ndarray:
        self.calls.append(list(texts))
        return np.ones((len(texts), 384), dtype=np.float32)


async def test_loading_ends_with_one_warm_up_encode(monkeypatch: pytest.MonkeyPatch) -> None:
    model = FakeModel()
    embedder = SentenceTransformerEmbedder(cache_size=0)
    monkeypatch.setattr(embedder, "_build_model", lambda: model)
    assert not embedder.loaded
    await embedder.load()
    assert embedder.loaded
    assert len(model.calls) == 1 and len(model.calls[0]) == 1  # the warm-up, at load

    await embedder.load()  # loaded once
    await embedder.embed_one("the first real message")
    assert model.calls[1:] == [["the first real message"]]


@pytest.mark.slow
async def test_the_real_model_serves_on_the_threads_it_was_given(
    real_embedder: SentenceTransformerEmbedder,
) -> None:
    import torch

    await real_embedder.load()
    assert real_embedder.threads == DEFAULT_THREADS
    assert torch.get_num_threads() == DEFAULT_THREADS


def test_the_hosts_embedder_takes_its_threads_from_the_settings_dotenv_included(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic import ValidationError

    from carrier.assemble import default_embedder
    from carrier.settings import explain_settings, load_settings

    monkeypatch.delenv("CARRIER_EMBED_THREADS", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("CARRIER_EMBED_THREADS=3\n")
    settings = load_settings()
    assert settings.embed_threads == 3
    assert default_embedder(settings).threads == 3  # type: ignore[attr-defined]
    assert default_embedder(load_settings({})).threads == DEFAULT_THREADS  # type: ignore[attr-defined]
    with pytest.raises(ValidationError) as refused:
        load_settings({"CARRIER_EMBED_THREADS": "-1"})
    assert "CARRIER_EMBED_THREADS" in str(explain_settings(refused.value))
