"""Where a tool request may go: public addresses only, checked when the connection is made.

A registered tool names a URL; a person's message only chooses its arguments. Still, the URL's
host is a *name*, and what a name resolves to can change: a DNS answer may point at
``127.0.0.1``, at the cloud metadata service (``169.254.169.254``), or at a private network, and
it may change between a check and the connection (DNS rebinding). So the check is not made on
the URL but inside the connection itself: :class:`GuardedBackend` is the httpcore network
backend of the tool's HTTP client; it resolves the host with its own :data:`Resolver`, checks
every address it got (:func:`refusal`), and connects to the checked address (never resolving
again). TLS and the ``Host`` header still use the name, as httpcore passes the name to
``start_tls`` and httpx writes the URL's host.

Addresses refused: loopback, private (RFC 1918, ``fc00::/7``), link-local (``169.254.0.0/16``,
``fe80::/10``), shared (``100.64.0.0/10``), multicast, unspecified, reserved and documentation
ranges — anything Python's :mod:`ipaddress` does not call global — including IPv4 addresses
wrapped in IPv6 (``::ffff:127.0.0.1``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``). A host
written as a number (``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``) is read the way the
C resolver reads it (``inet_aton``), so it is checked as the address it is.

An operator may name hosts that are meant to be internal (``CARRIER_TOOL_INTERNAL_HOSTS``); a
connection to one of those names is not checked. Redirects are never followed (the tool's client
turns them off), and proxies from the environment are not used: a proxy would resolve the name
itself, out of this check's sight.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from typing import Any

import httpcore
import httpx

__all__ = [
    "EgressRefused",
    "GuardedBackend",
    "Resolver",
    "guarded_transport",
    "literal_address",
    "normalize_host",
    "refusal",
    "system_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""``await resolver(host, port)``: the addresses (as text) a host name stands for."""

_NUMERIC = re.compile(r"^[0-9a-fA-FxX.]+$")
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_METADATA = ipaddress.ip_address("169.254.169.254")


class EgressRefused(Exception):
    """A tool request was not sent: its host is, or resolves to, an address tools may not
    reach. The message names the host, the address and the setting that would allow it."""

    def __init__(self, host: str, address: str, why: str) -> None:
        self.host, self.address, self.why = host, address, why
        shown = host if host == address else f"{host} ({address})"
        super().__init__(
            f"{shown} is {why}; tools may reach public addresses only (an operator can allow "
            "an internal host by naming it in CARRIER_TOOL_INTERNAL_HOSTS)"
        )


def normalize_host(host: str) -> str:
    """A host as compared with a list of hosts: lower case, no brackets, no trailing dot, and an
    address written in any numeric form as its usual text."""
    host = host.strip().strip("[]").rstrip(".").lower()
    literal = literal_address(host)
    return str(literal) if literal is not None else host


def literal_address(host: str) -> IPAddress | None:
    """The address a host written as an address stands for, or None for a name. Numeric forms
    the C resolver accepts (``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``) count."""
    text = host.strip().strip("[]").split("%", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    if _NUMERIC.match(text) and any(c.isdigit() for c in text):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None
    return None


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, NAT64, 6to4, IPv4-compatible)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in net for net in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if 1 < int(address) < 2**32:  # ::a.b.c.d, the deprecated IPv4-compatible form
        return ipaddress.IPv4Address(int(address))
    return None


def refusal(address: IPAddress) -> str | None:
    """Why a tool may not connect to ``address`` ("a loopback address", ...), or None for a
    public one."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_v4(address)
        if inner is not None:
            why = refusal(inner)
            return f"{why}, wrapped in IPv6" if why else None
    if address == _METADATA:
        return "the cloud metadata address (link-local)"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv4Address) and address in _SHARED:
        return "a shared (carrier-grade NAT) address"
    if address.is_private:
        return "a private address"
    if address.is_reserved or not address.is_global:
        return "a reserved or non-public address"
    return None


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the system's resolver gives for ``host`` (TCP), without duplicates."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: dict[str, None] = {}
    for *_, sockaddr in infos:
        seen.setdefault(str(sockaddr[0]), None)
    return list(seen)


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that connects only to addresses :func:`refusal` allows, or
    to any address of a host in ``internal_hosts``. The host is resolved once, here, and the
    connection made to the address checked."""

    def __init__(
        self,
        *,
        internal_hosts: Collection[str] = (),
        resolver: Resolver | None = None,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.internal_hosts = frozenset(normalize_host(h) for h in internal_hosts)
        self.resolver: Resolver = resolver or system_resolver
        self._inner = inner or httpcore.AnyIOBackend()

    async def addresses(self, host: str, port: int, *, limit_s: float | None = None) -> list[str]:
        """The addresses a connection to ``host`` may use, every one checked; raises
        :class:`EgressRefused` if any of them is refused (one bad answer taints the name)."""
        name = normalize_host(host)
        literal = literal_address(host)
        if literal is not None:
            found = [str(literal)]
        else:
            try:
                found = list(await asyncio.wait_for(self.resolver(host, port), limit_s))
            except (OSError, TimeoutError) as exc:
                raise httpcore.ConnectError(f"could not resolve {host}: {exc}") from None
            if not found:
                raise httpcore.ConnectError(f"{host} resolves to no address")
        if name in self.internal_hosts:
            return found
        checked: list[str] = []
        for text in found:
            address = literal_address(text)
            why = "not an address" if address is None else refusal(address)
            if why is not None:
                raise EgressRefused(host, text, why)
            checked.append(str(address))
        return checked

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        last: Exception | None = None
        for address in await self.addresses(host, port, limit_s=timeout):
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise EgressRefused(path, path, "a local socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def guarded_transport(
    *,
    internal_hosts: Collection[str] = (),
    resolver: Resolver | None = None,
    inner: httpcore.AsyncNetworkBackend | None = None,
) -> httpx.AsyncBaseTransport:
    """An httpx transport whose connections go through a :class:`GuardedBackend`; no proxy from
    the environment (``trust_env`` off), no retries. Use it with ``follow_redirects=False``."""
    transport = httpx.AsyncHTTPTransport(trust_env=False, retries=0)
    # httpx builds its connection pool without a way to pass a network backend; the pool is
    # replaced with one that has ours (same TLS context, defaults otherwise).
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=httpx.create_ssl_context(trust_env=False),
        network_backend=GuardedBackend(
            internal_hosts=internal_hosts, resolver=resolver, inner=inner
        ),
        max_connections=10,
        keepalive_expiry=5.0,
    )
    return transport
