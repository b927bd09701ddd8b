"""The HTTP side of :class:`~clients.instagram.fake.graph.FakeGraphAPI` (stdlib http.server)."""

from __future__ import annotations

import json
import mimetypes
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

if TYPE_CHECKING:
    from clients.instagram.fake.graph import FakeGraphAPI

__all__ = ["GraphHandler", "graph_error"]


def graph_error(
    status: int,
    message: str,
    code: int,
    kind: str = "OAuthException",
    *,
    subcode: int | None = None,
    transient: bool = False,
    user_title: str | None = None,
) -> tuple[int, Any]:
    error: dict[str, Any] = {
        "message": message,
        "type": kind,
        "code": code,
        "is_transient": transient,
        "fbtrace_id": "AbCdEfGhIjK",
    }
    if subcode is not None:
        error["error_subcode"] = subcode
    if user_title:
        error["error_user_title"] = user_title
    return status, {"error": error}


def _json_params(body: str) -> dict[str, str]:
    """A JSON body as parameters: objects kept as JSON text (as a form field would carry them)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    if not isinstance(parsed, dict):
        return {}
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in parsed.items()}


class GraphHandler(BaseHTTPRequestHandler):
    """Routes HTTP to the fake's ``handle`` (API) or its ``static_root`` (``/media/``)."""

    fake: FakeGraphAPI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._static(head=True)

    def do_GET(self) -> None:
        if urlsplit(self.path).path.startswith("/media/"):
            self._static(head=False)
        else:
            self._api("GET")

    def do_POST(self) -> None:
        self._api("POST")

    def do_DELETE(self) -> None:
        self._api("DELETE")

    def _static(self, *, head: bool) -> None:
        root = self.fake.static_root
        name = unquote(urlsplit(self.path).path[len("/media/") :])
        path = (root / name) if root and name and "/" not in name and ".." not in name else None
        if path is None or not path.is_file():
            self._send(404, b"not found", "text/plain", head=head)
            return
        ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        self._send(200, path.read_bytes(), ctype, head=head)

    def _api(self, method: str) -> None:
        split = urlsplit(self.path)
        params = {k: v[-1] for k, v in parse_qs(split.query).items()}
        length = int(self.headers.get("content-length") or 0)
        if length:
            body = self.rfile.read(length).decode()
            if self.headers.get("content-type", "").startswith("application/json"):
                params.update(_json_params(body))
            else:
                params.update({k: v[-1] for k, v in parse_qs(body).items()})
        token = params.pop("access_token", None)
        auth = self.headers.get("authorization", "")
        if auth.startswith("Bearer "):
            token = auth[len("Bearer ") :]
        if token != self.fake.token:
            status, payload = graph_error(
                400, "Invalid OAuth access token - Cannot parse access token", 190
            )
        else:
            status, payload = self.fake.handle(method, split.path, params)
        if status == 0:  # a dropped connection: no answer at all
            self.close_connection = True
            return
        self._send(status, json.dumps(payload).encode(), "application/json")

    def _send(self, status: int, body: bytes, ctype: str, *, head: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)
