""":class:`~clients.instagram.fake.private.FakeInstagram` over loopback HTTP, for instagrapi in
another process: a real ``carrier`` started by a test.

The test process serves the world (``with ig.serve() as url:``, a :class:`PrivateServer`); in
the other process, :func:`point_instagrapi_at` makes every ``instagrapi.Client`` the product
builds send its requests there. A transport adapter (:class:`ForwardingAdapter`) rewrites
``https://i.instagram.com/api/v1/...`` (and instagrapi's other hosts) to ``<url>/api/v1/...``,
keeping the path, the query, the headers and the body, so instagrapi's login, its saved
session, its signed bodies and its error mapping run exactly as they would against Instagram.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from requests.models import PreparedRequest
from requests.structures import CaseInsensitiveDict

if TYPE_CHECKING:
    import instagrapi

    from clients.instagram.fake.private import FakeInstagram

__all__ = ["ForwardingAdapter", "PrivateServer", "loopback_client_factory", "point_instagrapi_at"]

FORWARDED_HOST = "X-Forwarded-Host"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A caller that went away mid-answer (a killed process) is not the fake's error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    world: FakeInstagram
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def _answer(self, method: str) -> None:
        length = int(self.headers.get("content-length") or 0)
        request = PreparedRequest()
        request.method = method
        host = self.headers.get(FORWARDED_HOST) or "i.instagram.com"
        request.url = f"https://{host}{self.path}"
        request.headers = CaseInsensitiveDict(dict(self.headers.items()))
        request.body = self.rfile.read(length) if length else None
        status, body, headers = self.world.answer(request)
        if status == 0:  # a dropped connection: no answer at all
            self.close_connection = True
            return
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class PrivateServer:
    """Serves a :class:`FakeInstagram` on a loopback port while the ``with`` block runs; the
    block gets its base URL (``http://127.0.0.1:PORT``)."""

    def __init__(self, world: FakeInstagram) -> None:
        handler = type("Handler", (_Handler,), {"world": world})
        self._server = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fake-instagram", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> str:
        self._thread.start()
        return self.url

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class ForwardingAdapter(HTTPAdapter):
    """Sends each request to ``base_url`` instead of its own host (the host goes along in
    ``X-Forwarded-Host``); the response reads as the original request's."""

    def __init__(self, base_url: str) -> None:
        super().__init__(max_retries=0)
        self.base_url = base_url.rstrip("/")

    def send(self, request: PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        original = urlsplit(request.url or "")
        forwarded = request.copy()
        query = f"?{original.query}" if original.query else ""
        forwarded.url = f"{self.base_url}{original.path}{query}"
        forwarded.headers[FORWARDED_HOST] = original.netloc
        forwarded.headers.pop("Host", None)  # instagrapi's domain routing: the fake's own host
        kwargs["proxies"] = {}  # loopback, never through a proxy from the environment
        response = super().send(forwarded, **kwargs)
        response.request = request
        response.url = request.url or ""
        return response


def loopback_client_factory(base_url: str) -> Callable[[], instagrapi.Client]:
    """A factory of ``instagrapi.Client`` instances whose every session (private, public,
    graphql) sends its requests to ``base_url``, with instagrapi's own pause between requests
    (``request_timeout``) off."""
    import instagrapi

    class Client(instagrapi.Client):
        def _configure_private_session_retry(self, private_transport: Any = None) -> None:
            _forward(self, base_url)

        def _configure_public_session_retry(self) -> None:
            _forward(self, base_url)

    def make() -> instagrapi.Client:
        client = Client(with_challenge_flow=False, request_timeout=0, private_transport="requests")
        _forward(client, base_url)
        return client

    return make


def _forward(client: Any, base_url: str) -> None:
    for name in ("private", "public", "graphql"):
        session = getattr(client, name, None)
        if isinstance(session, requests.Session):
            adapter = ForwardingAdapter(base_url)
            session.mount("https://", adapter)
            session.mount("http://", adapter)


def point_instagrapi_at(base_url: str) -> None:
    """In this process, the instagrapi publisher's clients talk to ``base_url`` (a
    :class:`PrivateServer`): the default client factory is replaced. For tests only."""
    import clients.instagram.private as private

    private.default_client_factory = loopback_client_factory(base_url)
