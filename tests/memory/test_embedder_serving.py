"""The embedder as served: its intra-op threads from ``CARRIER_EMBED_THREADS`` (one by default,
as measured), and a warm-up encode at load so the first message pays no start-up cost."""

from __future__ import annotations

import os
import subprocess
import sys
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
    """Stands in for the engine: records what it was asked to encode."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.ones((len(texts), 384), dtype=np.float32)


async def test_loading_ends_with_one_warm_up_encode(monkeypatch: pytest.MonkeyPatch) -> None:
    model = FakeModel()
    embedder = SentenceTransformerEmbedder(cache_size=0)
    assert embedder.engine == "numpy"
    monkeypatch.setattr(embedder, "_build_numpy", lambda: model)
    assert not embedder.loaded
    await embedder.load()
    assert embedder.loaded
    assert len(model.calls) == 1 and len(model.calls[0]) == 1  # the warm-up, at load

    await embedder.load()  # loaded once
    await embedder.embed_one("the first real message")
    assert model.calls[1:] == [["the first real message"]]


@pytest.mark.slow
@pytest.mark.parametrize("threads", [None, 2])
def test_the_numpy_engine_encodes_on_the_threads_it_was_given(threads: int | None) -> None:
    # In a process of its own, as served: numpy's BLAS as the library reports it mid-encode.
    script = (
        "import asyncio\n"
        "from carrier.memory._blas import _blas_libraries\n"
        "from carrier.memory.bert import BertEncoder\n"
        "from carrier.memory.sentence import SentenceTransformerEmbedder\n"
        "seen = []\n"
        "encode = BertEncoder.encode\n"
        "def recording(self, texts):\n"
        "    seen.extend(lib.num_threads for lib in _blas_libraries())\n"
        "    return encode(self, texts)\n"
        "BertEncoder.encode = recording\n"
        f"embedder = SentenceTransformerEmbedder(cache_size=0, threads={threads})\n"
        "asyncio.run(embedder.embed_one('counted while it encodes'))\n"
        "print(embedder.threads, sorted(set(seen)))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != THREADS_ENV}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    want = DEFAULT_THREADS if threads is None else threads
    assert done.stdout.split() == [str(want), f"[{want}]"]


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
