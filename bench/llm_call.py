"""What a model call costs Carrier's process beyond the HTTP exchange: litellm's overhead, and
the lean path's (``carrier/llm/_direct.py``).

``LiteLLMProvider.generate`` against the loopback model server (``bench/_model_server.py``) is
timed in CPU seconds of this process, through litellm (``direct=False``) and over the lean path,
against the same request sent with bare ``aiohttp`` and bare ``httpx`` clients; the difference
is what litellm (or the lean path) and the provider around it spend per call on the event
loop's thread. ``--concurrency`` keeps that many calls in flight (``--latency`` the server's
answer time): how each fares with a busy agent's calls. Also printed: ``prepare()`` (litellm's
import and warm-up) and the first call after it (what the first turn pays). ``--profile`` prints
where litellm's time goes.

    .venv/bin/python bench/llm_call.py --calls 200
    .venv/bin/python bench/llm_call.py --calls 1000 --concurrency 100 --latency 1.0
    .venv/bin/python bench/llm_call.py --calls 100 --profile
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp
import httpx
from _served import free_port, wait_ready


async def cpu_per_call(
    call: Callable[[], Awaitable[object]], calls: int, concurrency: int
) -> float:
    """CPU seconds of this process per call, ``concurrency`` calls in flight, after a warm-up."""
    await asyncio.gather(*(call() for _ in range(min(concurrency, 20))))
    left = calls

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await call()

    cpu = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (time.process_time() - cpu) / calls


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
        str(args.latency),
    )
    try:
        await wait_ready(base.removesuffix("/v1"), path="/stats")
        os.environ.pop("OPENAI_API_KEY", None)
        litellm = LiteLLMProvider(args.model, api_base=base, direct=False)
        lean = LiteLLMProvider(args.model, api_base=base)
        began = time.perf_counter()
        await litellm.prepare()
        prepared = time.perf_counter() - began
        # A reply-sized prompt: a persona's system prompt and a conversation.
        messages = [
            ChatMessage(role="system", content="You are Bench, who answers kindly. " * 60),
            ChatMessage(role="user", content="<conversation>hello there</conversation> " * 40),
        ]
        request = ModelRequest(messages=messages, purpose="response")
        began = time.perf_counter()
        await litellm.generate(request)
        first = time.perf_counter() - began
        await lean.prepare()
        payload = {
            "model": args.model.split("/", 1)[-1],
            "messages": [m.model_dump() for m in messages],
        }
        url = f"{base}/chat/completions"
        figures: dict[str, float] = {}
        n, conc = args.calls, args.concurrency
        figures["through litellm"] = await cpu_per_call(lambda: litellm.generate(request), n, conc)
        figures["lean path"] = await cpu_per_call(lambda: lean.generate(request), n, conc)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

            async def bare_aiohttp() -> object:
                async with session.post(url, data=json.dumps(payload)) as response:
                    return json.loads(await response.read())

            figures["bare aiohttp"] = await cpu_per_call(bare_aiohttp, n, conc)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=512)
        async with httpx.AsyncClient(limits=limits) as http:

            async def bare_httpx() -> object:
                return (await http.post(url, json=payload, timeout=30)).json()

            figures["bare httpx"] = await cpu_per_call(bare_httpx, n, conc)
        await lean.aclose()
        print(f"prepare (import + warm-up): {prepared:.2f} s; first call after it: {first:.3f} s")
        print(
            f"CPU per call, {conc} in flight, {args.model}: "
            + ", ".join(f"{name} {seconds * 1000:.2f} ms" for name, seconds in figures.items())
        )
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(args.calls):
                await litellm.generate(request)
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
    parser.add_argument("--concurrency", type=int, default=1, help="calls in flight")
    parser.add_argument("--latency", type=float, default=0.0, help="the server's answer time")
    parser.add_argument("--profile", action="store_true")
    asyncio.run(main(parser.parse_args()))
