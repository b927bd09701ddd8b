"""A seeded, fault-injecting OpenAI-compatible model server on loopback.

``POST /v1/chat/completions`` answers as JSON or, with ``"stream": true``, as server-sent events,
with a well-formed Carrier response (``<response><thought>…</thought><actions>REPLY</actions>
<text>…</text></response>``). A share of requests (``FaultMix.rate``) gets one of the faults seen
in the wild instead, drawn from a seeded generator so a run is reproducible:

- ``500``: an internal server error;
- ``429``: rate limited, with ``Retry-After`` (and ``retry-after-ms``);
- ``hang``: nothing for ``hang`` seconds (longer than the client's per-attempt timeout), then
  the answer, which no one is waiting for any more;
- ``bad_json``: a 200 whose body is not JSON (a stream: an event that is not JSON);
- ``no_choices``: a 200 with an empty ``choices`` list (a stream: chunks without choices);
- ``cut``: streams only, the connection closes after the first chunk (the role, no text).

Each model name has its own mix (``mixes``; others use ``default``), so one server plays a
flaky primary and a healthy fallback. ``counts`` tallies what was served, by model and outcome.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FAULTS", "FaultMix", "FaultServer", "carrier_answer"]

FAULTS = ("500", "429", "hang", "bad_json", "no_choices", "cut")
"""Every fault the server can inject."""
JSON_FAULTS = ("500", "429", "hang", "bad_json", "no_choices")
"""The faults a non-streamed request can get (``cut`` needs a stream)."""


@dataclass
class FaultMix:
    """What share of requests fail (``rate``, 0 to 1) and how (``kinds``, drawn uniformly)."""

    rate: float = 0.3
    kinds: tuple[str, ...] = FAULTS

    @classmethod
    def healthy(cls) -> FaultMix:
        return cls(rate=0.0)

    @classmethod
    def always(cls, *kinds: str) -> FaultMix:
        return cls(rate=1.0, kinds=kinds or FAULTS)


def carrier_answer(text: str, thought: str = "Answering the question.") -> str:
    """A model answer in the format Carrier asks for."""
    return (
        f"<response><thought>{thought}</thought><actions>REPLY</actions>"
        f"<text>{text}</text></response>"
    )


@dataclass
class FaultServer:
    """Start with :meth:`start` (a port of its own on 127.0.0.1), stop with :meth:`stop`."""

    default: FaultMix = field(default_factory=FaultMix)
    mixes: dict[str, FaultMix] = field(default_factory=dict)
    """Per model name as the server receives it (``primary``, not ``openai/primary``)."""
    seed: int = 15
    hang: float = 2.0
    """Seconds a ``hang`` lasts before the (late) answer."""
    retry_after: float = 0.2
    """Seconds a ``429`` asks the client to wait."""
    reply: str = "All good here."
    """The reply text; each answer ends with `` #n``, n the request's number."""
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(model, outcome) → requests served; outcome is ``ok`` or a fault name."""
    streams: Counter[tuple[str, str]] = field(default_factory=Counter)
    """The same, for streamed requests only."""
    _rng: random.Random = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _served: int = 0
    _httpd: ThreadingHTTPServer | None = None

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def served(self) -> int:
        return self._served

    def total(self, outcome: str | None = None, model: str | None = None) -> int:
        return sum(
            n
            for (m, o), n in self.counts.items()
            if (outcome is None or o == outcome) and (model is None or m == model)
        )

    def _draw(self, model: str, stream: bool) -> tuple[int, str]:
        mix = self.mixes.get(model, self.default)
        with self._lock:
            self._served += 1
            number = self._served
            kinds = mix.kinds if stream else tuple(k for k in mix.kinds if k in JSON_FAULTS)
            roll = self._rng.random()
            pick = self._rng.randrange(len(kinds)) if kinds else 0
            outcome = kinds[pick] if kinds and roll < mix.rate else "ok"
            self.counts[(model, outcome)] += 1
            if stream:
                self.streams[(model, outcome)] += 1
        return number, outcome

    def start(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                model = str(body.get("model"))
                stream = bool(body.get("stream"))
                number, outcome = server._draw(model, stream)
                text = carrier_answer(f"{server.reply} #{number}")
                # A client that gave up waiting (its timeout) has nothing left to answer.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._serve(body, outcome, text, stream)

            def _serve(self, body: dict[str, Any], outcome: str, text: str, stream: bool) -> None:
                if outcome == "500":
                    error = {"message": "injected fault", "type": "server_error"}
                    self._send(500, json.dumps({"error": error}).encode())
                elif outcome == "429":
                    error = {"message": "slow down", "type": "rate_limit_exceeded"}
                    wait = server.retry_after
                    headers = {
                        "Retry-After": str(max(1, round(wait))),
                        "retry-after-ms": str(int(wait * 1000)),
                    }
                    self._send(429, json.dumps({"error": error}).encode(), headers)
                elif outcome == "bad_json" and not stream:
                    self._send(200, b'{"id": "chatcmpl-x", "choices": [{"mess')
                elif outcome == "no_choices" and not stream:
                    self._send(200, json.dumps({**_completion(body, ""), "choices": []}).encode())
                else:
                    if outcome == "hang":
                        time.sleep(server.hang)
                    if stream:
                        self._stream(body, text, outcome)
                    else:
                        self._send(200, json.dumps(_completion(body, text)).encode())

            def _send(
                self, status: int, data: bytes, headers: dict[str, str] | None = None
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

            def _stream(self, body: dict[str, Any], text: str, outcome: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                base = {
                    "id": "chatcmpl-faults",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": body.get("model"),
                }
                events: list[dict[str, Any] | str] = [
                    {**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]}
                ]
                if outcome == "cut":
                    pass  # the role chunk only, then the connection closes
                elif outcome == "bad_json":
                    events.append('{"choices": [{"delta": ')
                elif outcome == "no_choices":
                    events += [{**base, "choices": []}] * 3
                else:
                    pieces = [text[i : i + 12] for i in range(0, len(text), 12)]
                    events += [
                        {**base, "choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces
                    ]
                    events.append(
                        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                    )
                    if (body.get("stream_options") or {}).get("include_usage"):
                        events.append({**base, "choices": [], "usage": _usage()})
                for event in events:
                    data = event if isinstance(event, str) else json.dumps(event)
                    self.wfile.write(f"data: {data}\n\n".encode())
                    self.wfile.flush()
                if outcome in ("ok", "hang", "no_choices"):
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


def _usage() -> dict[str, int]:
    return {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}


def _completion(body: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-faults",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model"),
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": _usage(),
    }
