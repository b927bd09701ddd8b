"""Bearer-token authentication, scopes and per-token rate limits.

Two kinds of token:

* the **admin** token: may do everything. ``CARRIER_ADMIN_TOKEN`` when set, else the local token
  minted into the data dir (:mod:`carrier.local_token`; the server then binds to loopback only);
* **per-agent** tokens (``POST /tokens``): may message one agent, upload its media, read it and
  its memories; nothing else. Stored as sha256 hashes in the store settings (``api_tokens``).

Every request to a protected route needs one: where it comes from (loopback or not) grants
nothing, because every process and browser page on the machine can reach loopback.

Tokens are compared in constant time. Missing token: 401 with ``WWW-Authenticate: Bearer``; wrong
token: 401; wrong scope: 403; too many requests for one token: 429 with ``Retry-After``. Failed
attempts are counted per client address: past the burst, a wrong token gets 429 instead of 401.
A valid token is always accepted, limited only by its own rate: a flood of guesses from an
address (or from everyone behind the same proxy) never locks its owner out. What keeps tokens
from being guessed is their length (256 random bits when Carrier makes them, at least 24
characters for ``CARRIER_ADMIN_TOKEN``), not the failure count, which an attacker with many
addresses would spread out anyway.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import math
import secrets
import time
from dataclasses import dataclass
from typing import Any, NoReturn

from fastapi import Depends, Request
from fastapi.security import HTTPBearer

from carrier.api.errors import ApiError
from carrier.api.ratelimit import RateLimiter
from carrier.memory.base import Store
from carrier.types import utcnow

__all__ = ["Authenticator", "Principal", "TokenStore", "admin_only", "agent_access", "principal"]

TOKENS_KEY = "api_tokens"
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="carrier"'}

bearer_scheme = HTTPBearer(
    auto_error=False,
    description="CARRIER_ADMIN_TOKEN, or a per-agent token from POST /tokens.",
)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the admin, or a token scoped to one agent."""

    name: str
    admin: bool
    agent_id: str | None = None

    @property
    def rate_key(self) -> str:
        return "admin" if self.admin else f"token:{self.name}"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenStore:
    """Per-agent tokens, hashed, in the store settings, cached for ``ttl`` seconds."""

    def __init__(self, *, store: Store, ttl: float = 5.0) -> None:
        self.store, self.ttl = store, ttl
        self._cache: dict[str, dict[str, Any]] | None = None
        self._loaded = 0.0
        self._lock = asyncio.Lock()

    async def all(self) -> dict[str, dict[str, Any]]:
        """Token name → ``{"hash", "agent_id", "created_at"}``."""
        if self._cache is None or time.monotonic() - self._loaded > self.ttl:
            value = await self.store.get_setting(TOKENS_KEY)
            self._cache = dict(value) if isinstance(value, dict) else {}
            self._loaded = time.monotonic()
        return self._cache

    async def create(self, name: str, agent_id: str) -> tuple[dict[str, Any], str]:
        """A new token for one agent: its record and the token itself (shown once)."""
        async with self._lock:
            self._cache = None
            tokens = dict(await self.all())
            if name in tokens:
                raise ApiError(409, "token_exists", f"a token named {name!r} exists already")
            raw = "crr_" + secrets.token_urlsafe(32)
            record = {
                "hash": _digest(raw),
                "agent_id": agent_id,
                "created_at": utcnow().isoformat(),
            }
            tokens[name] = record
            await self.store.set_setting(TOKENS_KEY, tokens)
            self._cache = tokens
            return record, raw

    async def delete(self, name: str) -> bool:
        async with self._lock:
            self._cache = None
            tokens = dict(await self.all())
            if tokens.pop(name, None) is None:
                return False
            await self.store.set_setting(TOKENS_KEY, tokens)
            self._cache = tokens
            return True

    async def delete_for_agent(self, agent_id: str) -> None:
        for name, record in list((await self.all()).items()):
            if record.get("agent_id") == agent_id:
                await self.delete(name)

    async def verify(self, token: str) -> Principal | None:
        digest = _digest(token)
        found: Principal | None = None
        for name, record in (await self.all()).items():  # compare every one: no early exit
            if hmac.compare_digest(str(record.get("hash", "")), digest):
                found = Principal(name=name, admin=False, agent_id=str(record.get("agent_id")))
        return found


class Authenticator:
    """Turns a request into a :class:`Principal`, or raises 401/429."""

    def __init__(self, *, admin_token: str, tokens: TokenStore, limiter: RateLimiter) -> None:
        if not admin_token.strip():
            raise ValueError("the admin token may not be empty")
        self.admin_token = admin_token.encode("utf-8")
        self.tokens = tokens
        self.limiter = limiter

    async def authenticate(self, request: Request) -> Principal:
        host = request.client.host if request.client else None
        header = request.headers.get("authorization")
        if header is None:
            raise ApiError(
                401,
                "unauthorized",
                "missing bearer token: send Authorization: Bearer <token> (the admin token is "
                "CARRIER_ADMIN_TOKEN, or the admin.token file in the data dir when that is unset)",
                headers=_CHALLENGE,
            )
        scheme, _, token = header.partition(" ")
        token = token.strip()
        found: Principal | None = None
        if scheme.lower() == "bearer" and token:
            if hmac.compare_digest(token.encode("utf-8"), self.admin_token):
                found = Principal(name="admin", admin=True)
            else:
                found = await self.tokens.verify(token)
        if found is None:
            self._failed(host)
        return self._limited(found)

    def _failed(self, host: str | None) -> NoReturn:
        """401 for a wrong token; 429 once this address has failed more than the burst (the
        count refills at the per-token rate)."""
        wait = self.limiter.hit(f"fail:{host}")
        if wait > 0:
            raise _too_many(wait, "too many failed authentication attempts from this address")
        raise ApiError(
            401,
            "unauthorized",
            "invalid bearer token (expected CARRIER_ADMIN_TOKEN, the admin.token file in the "
            "data dir when that is unset, or a token from POST /tokens, as Authorization: "
            "Bearer <token>)",
            headers=_CHALLENGE,
        )

    def _limited(self, who: Principal) -> Principal:
        wait = self.limiter.hit(who.rate_key)
        if wait > 0:
            raise _too_many(wait, f"rate limit reached for {who.name!r}")
        return who


def _too_many(wait: float, why: str) -> ApiError:
    seconds = max(1, math.ceil(wait))
    return ApiError(
        429,
        "rate_limited",
        f"{why}; retry after {seconds} s",
        headers={"Retry-After": str(seconds)},
    )


async def principal(request: Request, _: Any = Depends(bearer_scheme)) -> Principal:
    """Dependency: the authenticated caller (any valid token). Kept on ``request.state`` for the
    audit middleware, which records who made each state-changing call."""
    auth: Authenticator = request.app.state.auth
    who = await auth.authenticate(request)
    request.state.principal = who
    return who


async def admin_only(who: Principal = Depends(principal)) -> Principal:
    """Dependency: the admin only."""
    if not who.admin:
        raise ApiError(
            403,
            "forbidden",
            f"token {who.name!r} is scoped to agent {who.agent_id!r}; this "
            "needs the admin token (CARRIER_ADMIN_TOKEN)",
        )
    return who


async def agent_access(agent_id: str, who: Principal = Depends(principal)) -> Principal:
    """Dependency: the admin, or a token scoped to the ``agent_id`` in the path."""
    if not who.admin and who.agent_id != agent_id:
        raise ApiError(
            403,
            "forbidden",
            f"token {who.name!r} is scoped to agent {who.agent_id!r}, not {agent_id!r}",
        )
    return who
