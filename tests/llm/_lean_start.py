"""Run by test_lean_start.py in a fresh interpreter: an agent's model made ready and answering
over the lean path, a stream and a question about images included, with no litellm loaded.

    python tests/llm/_lean_start.py BASE_URL

Once ``prepare()`` returned without importing litellm, a gate in ``sys.meta_path`` refuses its
import to any thread (so a call that needed litellm fails instead of loading it), and notes who
asked. Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


class Gate(MetaPathFinder):
    """Refuses litellm's import until :attr:`opened`, noting the threads that asked."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.seen: list[str] = []

    def find_spec(
        self,
        fullname: str,
        path: Any = None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname != "litellm" or self.opened.is_set():
            return None
        thread = threading.current_thread().name
        self.seen.append(thread)
        raise ImportError(f"litellm imported by {thread} on the lean path")


async def main(base_url: str) -> dict[str, Any]:
    from carrier.llm import _litellm
    from carrier.llm.base import ChatMessage, ModelRequest
    from carrier.llm.litellm_provider import LiteLLMProvider

    provider = LiteLLMProvider(
        "openai/local-llama",
        fallbacks=["openai/gpt-4o-mini"],
        api_base=base_url,
        api_key="sk-test",
        attempts=1,
    )
    request = ModelRequest(messages=[ChatMessage(role="user", content="hello")])
    await provider.prepare()
    report: dict[str, Any] = {"loaded_after_prepare": "litellm" in sys.modules}
    gate = Gate()  # after prepare, which found litellm's table (a finder's question, too)
    sys.meta_path.insert(0, gate)
    local = await provider.generate(request)  # answered by local-llama
    fallback = await provider.generate(request)  # local-llama fails (500): gpt-4o-mini answers
    report["loaded_at_answers"] = "litellm" in sys.modules
    report["answers"] = [
        {"model": r.model, "text": r.text, "cost": r.usage.cost_usd} for r in (local, fallback)
    ]
    report["stream"] = "".join([piece async for piece in provider.stream(request)])
    streamed = provider.last_result
    report["stream_cost"] = streamed.usage.cost_usd if streamed is not None else None
    report["vision"] = await provider.supports_vision()
    await asyncio.sleep(0.5)  # time for anything started in the background to ask for litellm
    report["loaded_at_end"] = "litellm" in sys.modules
    report["gate_saw"] = gate.seen
    gate.opened.set()
    report["litellm_cost"] = sum(
        (await _litellm.load_litellm()).cost_per_token(
            model="openai/gpt-4o-mini", prompt_tokens=12, completion_tokens=6
        )
    )
    await provider.aclose()
    return report


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
