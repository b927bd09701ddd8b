"""Fixtures for the model tests: a loopback OpenAI-compatible server and a no-wait backoff."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from carrier.llm._direct import DirectOpenAI
from carrier.llm._litellm import load_litellm_now
from carrier.llm.litellm_provider import LiteLLMProvider
from carrier.llm.resilience import Backoff
from tests.llm.openai_server import FakeOpenAIServer


@pytest.fixture(scope="session", autouse=True)
def litellm_imported_first() -> None:
    """litellm imported once, before these tests: a provider whose models all go over the lean
    path starts importing it in a background thread (see ``LiteLLMProvider.prepare``), which in
    this process would run on across the following tests. (tests/llm/test_lean_start.py shows
    the real start, in its own interpreter.)"""
    load_litellm_now()


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


@pytest.fixture(autouse=True)
async def close_direct_sessions(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """The providers a test makes and leaves open: their lean-path HTTP sessions are closed on
    the test's own loop (a runtime closes its model when it stops)."""
    made: list[DirectOpenAI] = []
    real = DirectOpenAI.__init__

    def init(self: DirectOpenAI, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(DirectOpenAI, "__init__", init)
    yield
    for direct in made:
        await direct.aclose()


@pytest.fixture(params=[True, False], ids=["direct", "litellm"])
def both_paths(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test runs twice: providers made without ``direct=`` send a plain ``openai/`` call
    over the lean path, then through litellm (streams go through litellm either way)."""
    defaults = LiteLLMProvider.__init__.__kwdefaults__
    assert defaults is not None and "direct" in defaults
    monkeypatch.setitem(defaults, "direct", request.param)


@pytest.fixture
def litellm_models(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """litellm's ``acompletion`` records the model of each call, then makes it as usual."""
    models: list[str] = []
    litellm = load_litellm_now()
    real = litellm.acompletion

    async def spy(**kwargs: object) -> object:
        models.append(str(kwargs["model"]))
        return await real(**kwargs)

    monkeypatch.setattr(litellm, "acompletion", spy)
    return models


@pytest.fixture
def no_litellm_call(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """litellm's ``acompletion`` records its calls and fails them: a test that expects the
    direct path sees an empty list."""
    calls: list[dict[str, object]] = []

    async def refuse(**kwargs: object) -> object:
        calls.append(kwargs)
        raise AssertionError("went through litellm")

    monkeypatch.setattr(load_litellm_now(), "acompletion", refuse)
    return calls
