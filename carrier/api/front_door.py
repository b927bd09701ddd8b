"""The API's front door: the ``Host`` a request names, and the ``Origin`` of one that changes state.

A browser will send requests to ``127.0.0.1`` for any page it shows, and a page may name the
server by a host of its own that it re-points at ``127.0.0.1`` (DNS rebinding). Two checks run
before any route, as plain ASGI (a streamed reply stays streamed):

* **Host**: the name in ``Host`` must be one this server is reached by: the address it listens
  on; on a loopback bind also ``localhost``, ``127.0.0.1`` and ``[::1]`` (on the server's own
  port); and the names in ``CARRIER_PUBLIC_HOSTS`` (a reverse proxy's, with any port unless the
  entry names one). A server on a public address without ``CARRIER_PUBLIC_HOSTS`` answers to any
  name, as it cannot know the names it is published under; it has ``CARRIER_ADMIN_TOKEN`` (the
  bind check demands it), and an IP address is accepted whenever the bind is public. Anything
  else: **421**, naming the setting.
* **Origin**: a ``POST``, ``PUT``, ``PATCH`` or ``DELETE`` whose ``Origin`` is neither the API's
  own (the request's scheme and ``Host``) nor in ``CARRIER_CORS_ORIGINS``, or that the browser
  marks ``Sec-Fetch-Site: cross-site``, is refused with **403**: a page elsewhere cannot change
  anything, even with a form or a "simple" request CORS never asks about. Requests without
  ``Origin`` (curl, the CLI, other servers) pass: they need a token like everyone.

The token (:mod:`carrier.api.auth`) is what really keeps a page out, as a page cannot learn it;
these checks keep the server from acting on a request a browser was tricked into sending even
when a token is not needed (``/health``, the console's files) or would be guessed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from carrier.api.errors import error_json

__all__ = ["LOOPBACK_NAMES", "FrontDoor", "HostPolicy", "is_loopback", "parse_authority"]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_DEFAULT_PORT = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_WILDCARDS = ("0.0.0.0", "::", "[::]", "")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address to listen on) is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def parse_authority(value: str) -> tuple[str, int | None] | None:
    """``host[:port]`` → (lower-case host, port or None); IPv6 in brackets (``[::1]:8000``), and
    a bare IPv6 address (a setting) gets its brackets. None when it is not an authority."""
    value = value.strip().lower()
    if not value or any(c in value for c in "/\\@?# \t"):
        return None
    if value.startswith("["):
        host, sep, rest = value.partition("]")
        host += "]"
        if not sep or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else None
    elif value.count(":") > 1:  # a bare IPv6 address
        if not _is_ip(value):
            return None
        return f"[{value}]", None
    else:
        host, sep, port_text = value.partition(":")
        port_text = port_text if sep else None
    if not host or host == "[]":
        return None
    if port_text is None:
        return host, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return host, int(port_text)


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """Which ``Host`` names a server bound to ``bind`` answers to (see the module docstring)."""

    local: frozenset[str]
    """Names accepted on the server's own port: the bind address, and the loopback names."""
    public: frozenset[tuple[str, int | None]]
    """``CARRIER_PUBLIC_HOSTS``: (name, port), port None for any."""
    any_host: bool
    """A public bind without ``CARRIER_PUBLIC_HOSTS``: every name."""
    any_ip: bool
    """A public bind: an IP address as ``Host`` (a probe, an operator's browser) is accepted."""

    @classmethod
    def for_bind(cls, bind: str, public_hosts: Iterable[str] = ()) -> HostPolicy:
        public = set()
        for entry in public_hosts:
            parsed = parse_authority(entry)
            if parsed is None:
                raise ValueError(
                    f"CARRIER_PUBLIC_HOSTS: {entry!r} is not a host name (expected name or "
                    "name:port, comma-separated)"
                )
            public.add(parsed)
        local = set(LOOPBACK_NAMES)
        bound = parse_authority(bind)
        if bind not in _WILDCARDS and bound is not None:
            local.add(bound[0])
        loopback = is_loopback(bind)
        return cls(
            local=frozenset(local),
            public=frozenset(public),
            any_host=not loopback and not public,
            any_ip=not loopback,
        )

    def allows(self, host: str, port: int | None, server_port: int | None, scheme: str) -> bool:
        """Whether ``host``/``port`` (from ``Host``) names this server, listening on
        ``server_port`` (None: unknown)."""
        if self.any_host:
            return True
        effective = port if port is not None else _DEFAULT_PORT.get(scheme)
        if (host, None) in self.public or (host, effective) in self.public:
            return True
        if host in self.local and (server_port is None or effective == server_port):
            return True
        return self.any_ip and _is_ip(host)


class FrontDoor:
    """Pure ASGI middleware: the Host check on every request, the Origin check on those that
    change state. A refused request reaches no route and changes nothing."""

    def __init__(self, app: ASGIApp, *, hosts: HostPolicy, origins: Sequence[str] = ()) -> None:
        self.app, self.hosts = app, hosts
        self.origins = {o for o in (_origin(value) for value in origins) if o is not None}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        scheme = str(scope.get("scheme", "http"))
        server = scope.get("server")
        server_port = server[1] if server and len(server) > 1 else None
        raw_host = headers.get(b"host")
        host = parse_authority(raw_host) if raw_host is not None else None
        if raw_host is not None and (
            host is None or not self.hosts.allows(host[0], host[1], server_port, scheme)
        ):
            name = raw_host[:100]
            response = error_json(
                421,
                "unknown_host",
                f"this server does not answer to the host name {name!r} (a page using a name "
                "of its own to reach it, or a proxy not announced): to serve it under that "
                "name, add it to CARRIER_PUBLIC_HOSTS (comma-separated)",
            )
            await response(scope, receive, send)
            return
        if scope["type"] == "http" and scope.get("method", "GET") in UNSAFE_METHODS:
            refusal = self._cross_origin(headers, scheme, host)
            if refusal is not None:
                response = error_json(403, "cross_origin", refusal)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _cross_origin(
        self, headers: dict[bytes, str], scheme: str, host: tuple[str, int | None] | None
    ) -> str | None:
        """Why a state-changing request is refused, or None."""
        if headers.get(b"sec-fetch-site", "").strip().lower() == "cross-site":
            return (
                "refused a request a web page on another site made (Sec-Fetch-Site: "
                "cross-site): pages elsewhere may not change Carrier"
            )
        given = headers.get(b"origin")
        if given is None:
            return None
        origin = _origin(given)
        own = None
        if host is not None:
            own = (scheme, host[0], host[1] if host[1] is not None else _DEFAULT_PORT.get(scheme))
        if origin is not None and (origin == own or origin in self.origins):
            return None
        return (
            f"refused a request from the web page at {given[:100]!r}: only this server's own "
            "pages may change Carrier; to allow a browser app at that origin, add it to "
            "CARRIER_CORS_ORIGINS"
        )


def _origin(value: str) -> tuple[str, str, int | None] | None:
    """``scheme://host[:port]`` → (scheme, host, port with the scheme's default filled in);
    None for ``null`` and anything else that is not an origin."""
    scheme, sep, rest = value.strip().lower().partition("://")
    if not sep or scheme not in _DEFAULT_PORT:
        return None
    parsed = parse_authority(rest.rstrip("/"))
    if parsed is None:
        return None
    host, port = parsed
    return scheme, host, port if port is not None else _DEFAULT_PORT[scheme]
