"""A loopback OpenAI-compatible model for benchmarks: every answer takes exactly ``--latency``
seconds and says something new.

It runs as its own process (``python bench/_model_server.py --port P``), so the model's side of a
benchmark costs the server under test nothing, and it is a bare asyncio HTTP/1.1 server with
keep-alive (hundreds of concurrent calls cost it a few coroutines, not threads). It answers
``POST /v1/chat/completions`` as JSON, or as server-sent events with ``"stream": true``:

- a reply prompt gets ``<response>…<actions>REPLY</actions><text>…</text></response>``;
- a fact-extraction prompt gets one new fact about the speaker, so the evaluator stores it;
- a summary prompt gets a short summary.

Every text carries a counter, so no two answers (nor the facts) share an embedding-cache entry:
the bench pays for what a real conversation pays for. ``GET /stats`` returns the calls served,
by kind.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import time
from collections import Counter
from typing import Any

_WORDS = [
    "river",
    "morning",
    "garden",
    "coffee",
    "music",
    "window",
    "train",
    "letter",
    "mountain",
    "story",
    "city",
    "friend",
    "market",
    "evening",
    "winter",
    "summer",
    "painting",
    "library",
    "bicycle",
    "harbor",
    "lantern",
    "recipe",
    "festival",
    "orchard",
    "journey",
    "island",
    "meadow",
    "notebook",
    "puzzle",
    "sunrise",
    "theater",
    "village",
    "canvas",
    "compass",
]

_served: Counter[str] = Counter()
_count = itertools.count(1)


def _sentence(rng: random.Random, n: int) -> str:
    words = rng.sample(_WORDS, 8)
    return (
        f"I keep thinking about the {words[0]} and the {words[1]} near the {words[2]}, number {n}."
    )


def answer_for(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """(kind, text) for a chat request: what the product would get from a real model."""
    system = str(messages[0].get("content", "")) if messages else ""
    n = next(_count)
    rng = random.Random(n)
    if "extract durable facts" in system:
        word = rng.choice(_WORDS)
        return "facts", json.dumps([{"claim": f"likes the {word} (note {n})", "about": ""}])
    if "# Task: summarize" in system:
        return "summary", f"They talked about {rng.choice(_WORDS)} and {rng.choice(_WORDS)} ({n})."
    if "should respond" in system or "should_respond" in system:
        return "should_respond", "<response><action>RESPOND</action></response>"
    text = _sentence(rng, n)
    return "reply", (
        f"<response><thought>answer kindly ({n})</thought><actions>REPLY</actions>"
        f"<text>{text}</text></response>"
    )


def _completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-bench-{next(_count)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 400, "completion_tokens": 40, "total_tokens": 440},
    }


def _chunks(model: str, text: str) -> list[bytes]:
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "model": model}
    pieces = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {"choices": [{"index": 0, "delta": {"content": text}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 400, "completion_tokens": 40}},
    ]
    out = [f"data: {json.dumps({**base, **p})}\n\n".encode() for p in pieces]
    return [*out, b"data: [DONE]\n\n"]


async def _handle(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, latency: float
) -> None:
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            began = time.monotonic()
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            headers = {
                k.strip().lower(): v.strip()
                for k, _, v in (line.partition(":") for line in lines[1:] if line)
            }
            body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
            if method == "GET" and path == "/stats":
                _send(writer, 200, json.dumps(dict(_served)).encode())
            elif method == "POST" and path.endswith("/chat/completions"):
                request = json.loads(body or b"{}")
                kind, text = answer_for(list(request.get("messages") or []))
                _served[kind] += 1
                # Exactly `latency` from the request's arrival: the model's pace, not ours.
                await asyncio.sleep(max(0.0, latency - (time.monotonic() - began)))
                model = str(request.get("model", "bench"))
                if request.get("stream"):
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                        b"Transfer-Encoding: chunked\r\n\r\n"
                    )
                    for chunk in _chunks(model, text):
                        writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    writer.write(b"0\r\n\r\n")
                else:
                    _send(writer, 200, json.dumps(_completion(model, text)).encode())
            else:
                _send(writer, 404, b'{"error": {"message": "not found"}}')
            await writer.drain()
    writer.close()


def _send(writer: asyncio.StreamWriter, status: int, data: bytes) -> None:
    reason = {200: "OK", 404: "Not Found"}[status]
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n".encode()
        + data
    )


async def main(port: int, latency: float) -> None:
    server = await asyncio.start_server(
        lambda r, w: _handle(r, w, latency), "127.0.0.1", port, backlog=1024
    )
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=1.0)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(args.port, args.latency))
