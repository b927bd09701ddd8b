"""A tiny OpenAI-compatible chat-completions server on loopback, for the real HTTP path.

Serves ``POST /v1/chat/completions`` as JSON or, with ``"stream": true``, as server-sent events
(``data: {...}`` chunks, a usage chunk when asked, ``data: [DONE]``). Replies are scripted with
:meth:`FakeOpenAIServer.queue`; models named in ``failing_models`` always answer 500. For a
seeded mix of faults, see ``tests/faults/fault_server.py``.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    text: str = "Hello from the loopback model."
    prompt_tokens: int = 12
    completion_tokens: int = 6
    break_after: int | None = None
    """Streaming only: send this many content chunks, then a broken event and hang up."""
    empty_choices: bool = False
    """JSON only: a 200 whose ``choices`` list is empty."""
    delay: float = 0.0
    """Seconds to wait before answering (longer than the client's timeout: a hang)."""
    finish_reason: str = "stop"


@dataclass
class Received:
    body: dict[str, Any]
    authorization: str | None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeOpenAIServer:
    default: Reply = field(default_factory=Reply)
    failing_models: set[str] = field(default_factory=set)
    requests: list[Received] = field(default_factory=list)
    _queue: deque[Reply] = field(default_factory=deque)
    _httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def queue(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    def next_reply(self, model: str) -> Reply:
        if model in self.failing_models:
            return Reply(status=500)
        return self._queue.popleft() if self._queue else self.default

    def start(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                # A client that gave up waiting (its timeout) has nothing left to answer.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._post()

            def _post(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(
                    Received(body, self.headers.get("Authorization"), dict(self.headers))
                )
                if not self.path.endswith("/chat/completions"):
                    self._json(404, {"error": {"message": "not found", "type": "not_found"}})
                    return
                reply = server.next_reply(str(body.get("model")))
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status != 200:
                    kind = "invalid_api_key" if reply.status == 401 else "server_error"
                    message = f"scripted {reply.status}"
                    if reply.status == 401:  # like OpenAI, quote the key that was sent
                        key = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                        message = f"Incorrect API key provided: {key}"
                    error = {"message": message, "type": kind, "code": kind}
                    self._json(reply.status, {"error": error})
                elif body.get("stream"):
                    self._stream(body, reply)
                elif reply.empty_choices:
                    self._json(200, {**_completion(body, reply), "choices": []})
                else:
                    self._json(200, _completion(body, reply))

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], reply: Reply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                words = reply.text.split(" ")
                pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
                base = {
                    "id": "chatcmpl-loopback",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": body.get("model"),
                }
                first = {"role": "assistant", "content": ""}
                events = [{**base, "choices": [{"index": 0, "delta": first}]}]
                events += [
                    {**base, "choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces
                ]
                events.append(
                    {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                )
                if (body.get("stream_options") or {}).get("include_usage"):
                    events.append({**base, "choices": [], "usage": _usage(reply)})
                if reply.break_after is not None:
                    events = events[: reply.break_after + 1]
                for event in events:
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                if reply.break_after is not None:
                    self.wfile.write(b'data: {"choices": [{"delta": \n\n')
                    self.wfile.flush()
                    return
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


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.text},
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": _usage(reply),
    }
