"""An agent whose models all go over the lean path starts and answers without litellm: a real
interpreter (tests/llm/_lean_start.py) against the loopback model server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from carrier.llm.litellm_provider import LiteLLMProvider
from tests.llm.openai_server import FakeOpenAIServer, Reply

SCRIPT = Path(__file__).with_name("_lean_start.py")


def test_an_agent_on_the_lean_path_answers_and_streams_without_litellm(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.queue(Reply(), Reply(status=500), Reply(), Reply())
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), openai_server.base_url],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["loaded_after_prepare"] is False
    assert report["loaded_at_answers"] is False
    local, fallback = report["answers"]
    assert (local["model"], local["cost"]) == ("openai/local-llama", 0.0)
    assert fallback["model"] == "openai/gpt-4o-mini"
    assert fallback["cost"] == pytest.approx(report["litellm_cost"]) and fallback["cost"] > 0
    # The stream went over the lean path too, priced by the table (local-llama: no price), and
    # the question about images was answered from the table: nothing ever asked for litellm.
    assert report["stream"] == "Hello from the loopback model."
    assert report["stream_cost"] == 0.0
    assert report["vision"] is False
    assert report["loaded_at_end"] is False
    assert report["gate_saw"] == []
    sent = [(r.body["model"], bool(r.body.get("stream"))) for r in openai_server.requests]
    assert sent == [
        ("local-llama", False),
        ("local-llama", False),
        ("gpt-4o-mini", False),
        ("local-llama", True),
    ]


async def test_a_chain_that_needs_litellm_anywhere_is_made_ready_through_it(
    openai_server: FakeOpenAIServer, litellm_models: list[str]
) -> None:
    base = {"api_base": openai_server.base_url, "api_key": "sk-test"}
    lean = LiteLLMProvider("openai/local-llama", fallbacks=["openai/gpt-4o-mini"], **base)
    await lean.prepare()
    assert litellm_models == []  # the lean chain is ready without litellm's warm-up call
    for provider in (
        LiteLLMProvider("openai/local-llama", fallbacks=["openai/o3-mini"], **base),
        LiteLLMProvider("openai/local-llama", fallbacks=["anthropic/claude-haiku-4-5"], **base),
        LiteLLMProvider("openai/local-llama", environ={}),  # no key: litellm says so
        LiteLLMProvider("openai/local-llama", direct=False, **base),
    ):
        await provider.prepare()
    assert litellm_models == ["openai/local-llama"] * 4
    assert openai_server.requests == []  # nothing was sent to get ready
