"""Fixtures for the model tests: a loopback OpenAI-compatible server and a no-wait backoff."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from carrier.llm.resilience import Backoff
from tests.llm.openai_server import FakeOpenAIServer


@pytest.fixture
def sleeps() -> list[float]:
    """The waits ``no_wait_backoff`` was asked for."""
    return []


@pytest.fixture
def no_wait_backoff(sleeps: list[float]) -> Backoff:
    """Backoff at the top of its range (0.5, 1, 2, 4 s) that records instead of sleeping."""

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return Backoff(base=0.5, cap=4.0, random=lambda: 1.0, sleep=sleep)


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer()
    server.start()
    yield server
    server.stop()
