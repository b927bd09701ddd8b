"""What the instagrapi publisher keeps in the Store: the session (encrypted) and a cooldown.

The session settings (cookies, device ids, authorization) are as good as a password, so they are
stored as a Fernet token; the key is the caller's (derived from ``CARRIER_SECRET_KEY``). A
session that cannot be decrypted (the key changed) is ignored with a warning: the next login
makes a new one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from carrier.memory.base import Store
from carrier.types import utcnow
from clients.instagram.errors import CoolingDown

__all__ = ["Cooldown", "SessionVault", "as_fernet"]

log = logging.getLogger(__name__)


def as_fernet(key: Fernet | MultiFernet | bytes | str) -> Fernet | MultiFernet:
    """A Fernet from a url-safe base64 32-byte key (or an existing Fernet/MultiFernet)."""
    if isinstance(key, Fernet | MultiFernet):
        return key
    return Fernet(key)


class SessionVault:
    """instagrapi session settings for one account, encrypted in the Store's settings."""

    def __init__(
        self, store: Store, agent_id: str, username: str, key: Fernet | MultiFernet | bytes | str
    ) -> None:
        self.store = store
        self.key = f"instagram:{agent_id}:instagrapi:{username}:session"
        self._fernet = as_fernet(key)

    async def load(self) -> dict[str, Any] | None:
        raw = await self.store.get_setting(self.key)
        if not raw:
            return None
        try:
            settings = json.loads(self._fernet.decrypt(str(raw["token"]).encode()))
        except (InvalidToken, KeyError, TypeError, ValueError):
            log.warning(
                "the stored instagrapi session (%s) cannot be decrypted with this key "
                "(was CARRIER_SECRET_KEY changed?); logging in afresh",
                self.key,
            )
            return None
        return settings if isinstance(settings, dict) else None

    async def save(self, settings: dict[str, Any]) -> None:
        token = self._fernet.encrypt(json.dumps(settings, default=str).encode()).decode()
        await self.store.set_setting(self.key, {"v": 1, "token": token})

    async def clear(self) -> None:
        await self.store.set_setting(self.key, None)


class Cooldown:
    """A persisted 'leave the account alone until T' after Instagram throttled it."""

    def __init__(
        self, store: Store, agent_id: str, username: str, *, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self.store = store
        self.key = f"instagram:{agent_id}:instagrapi:{username}:cooldown"
        self.clock = clock

    async def until(self) -> tuple[datetime, str] | None:
        raw = await self.store.get_setting(self.key)
        if not raw:
            return None
        until = datetime.fromisoformat(raw["until"])
        return (until, str(raw.get("reason", ""))) if until > self.clock() else None

    async def check(self) -> None:
        """Raise :class:`CoolingDown` while a cooldown runs."""
        current = await self.until()
        if current is not None:
            until, reason = current
            raise CoolingDown(until, f"the account is cooling down after: {reason}")

    async def start(self, until: datetime, reason: str) -> CoolingDown:
        await self.store.set_setting(self.key, {"until": until.isoformat(), "reason": reason})
        log.warning("instagram account cooling down until %s: %s", until.isoformat(), reason)
        return CoolingDown(until, f"Instagram throttled the account ({reason})")

    async def clear(self) -> None:
        await self.store.set_setting(self.key, None)
