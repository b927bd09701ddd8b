"""What a model call costs Carrier's process beyond the HTTP exchange: litellm's overhead.

``LiteLLMProvider.generate`` against the loopback model server (``bench/_model_server.py``,
answering at once) is timed in CPU seconds of this process, against the same request sent with
a bare ``httpx`` client; the difference is what litellm (and the provider around it) spends per
call on the event loop's thread. Also printed: ``prepare()`` (litellm's import and warm-up) and
the first call after it (what the first turn pays). ``--profile`` prints where the time goes.

    .venv/bin/python bench/llm_call.py --calls 200
    .venv/bin/python bench/llm_call.py --calls 100 --profile
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from _served import free_port, wait_ready


async def main(args: argparse.Namespace) -> None:
    from carrier.llm.base import ChatMessage, ModelRequest
    from carrier.llm.litellm_provider import LiteLLMProvider

    port = free_port()
    base = f"http://127.0.0.1:{port}/v1"
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).with_name("_model_server.py")),
        "--port",
        str(port),
        "--latency",
        "0",
    )
    try:
        await wait_ready(base.removesuffix("/v1"), path="/stats")
        os.environ.pop("OPENAI_API_KEY", None)
        provider = LiteLLMProvider(args.model, api_base=base)
        began = time.perf_counter()
        await provider.prepare()
        prepared = time.perf_counter() - began
        # A reply-sized prompt: a persona's system prompt and a conversation.
        messages = [
            ChatMessage(role="system", content="You are Bench, who answers kindly. " * 60),
            ChatMessage(role="user", content="<conversation>hello there</conversation> " * 40),
        ]
        request = ModelRequest(messages=messages, purpose="response")
        began = time.perf_counter()
        await provider.generate(request)
        first = time.perf_counter() - began
        for _ in range(20):
            await provider.generate(request)
        cpu = time.process_time()
        for _ in range(args.calls):
            await provider.generate(request)
        through_litellm = (time.process_time() - cpu) / args.calls
        payload = {
            "model": args.model.split("/", 1)[-1],
            "messages": [m.model_dump() for m in messages],
        }
        async with httpx.AsyncClient() as http:
            for _ in range(20):
                await http.post(f"{base}/chat/completions", json=payload)
            cpu = time.process_time()
            for _ in range(args.calls):
                (await http.post(f"{base}/chat/completions", json=payload)).json()
            bare = (time.process_time() - cpu) / args.calls
        print(f"prepare (import + warm-up): {prepared:.2f} s; first call after it: {first:.3f} s")
        print(
            f"CPU per call: through LiteLLMProvider {through_litellm * 1000:.2f} ms, bare httpx "
            f"{bare * 1000:.2f} ms: overhead {(through_litellm - bare) * 1000:.2f} ms"
        )
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(args.calls):
                await provider.generate(request)
            profile.disable()
            pstats.Stats(profile).sort_stats("cumulative").print_stats(40)
    finally:
        server.terminate()
        await server.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument(
        "--model",
        default="openai/bench-model",
        help="the litellm model string (the loopback server answers any): a name litellm "
        "prices (openai/gpt-4o-mini) or one it does not know (the default)",
    )
    parser.add_argument("--profile", action="store_true")
    asyncio.run(main(parser.parse_args()))
