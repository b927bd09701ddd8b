"""Run by test_lean_start.py in a fresh interpreter: an agent's model made ready and answering
over the lean path with no litellm loaded, then litellm loading in the background for a stream.

    python tests/llm/_lean_start.py BASE_URL

Once ``prepare()`` returned, litellm's import is held at a gate in ``sys.meta_path`` until the
answers are in: the background thread waits there, and any other thread that looks for litellm
fails at once (so a call that needed litellm fails instead of hanging). Prints one JSON line.
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

BACKGROUND = "carrier-litellm"


class Gate(MetaPathFinder):
    """Holds the background import of litellm until :attr:`opened`; refuses any other."""

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
        if thread != BACKGROUND:
            raise ImportError(f"litellm imported by {thread} before the answers were in")
        self.opened.wait(120)
        return None  # the real finders take it from here


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
    # (nothing has run on the loop since prepare returned: its background import has not begun)
    report: dict[str, Any] = {"loaded_after_prepare": "litellm" in sys.modules}
    gate = Gate()
    sys.meta_path.insert(0, gate)
    local = await provider.generate(request)  # answered by local-llama
    fallback = await provider.generate(request)  # local-llama fails (500): gpt-4o-mini answers
    report["loaded_at_answers"] = "litellm" in sys.modules
    report["answers"] = [
        {"model": r.model, "text": r.text, "cost": r.usage.cost_usd} for r in (local, fallback)
    ]
    gate.opened.set()
    loading = _litellm._loading  # the thread prepare started, or None
    if loading is not None:
        await asyncio.to_thread(loading.join, 120)
    report["loaded_in_background"] = loading is not None and _litellm._module is not None
    report["gate_saw"] = gate.seen
    report["stream"] = "".join([piece async for piece in provider.stream(request)])
    report["litellm_cost"] = sum(
        _litellm.litellm().cost_per_token(
            model="openai/gpt-4o-mini", prompt_tokens=12, completion_tokens=6
        )
    )
    await provider.aclose()
    return report


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
