"""Build a publisher from a character, its ``clientConfig.instagram`` and the environment.

This is the edge where secrets are resolved (``Character.resolve_secret``): the access token,
the FTP password, the Instagram login. Missing ones raise :class:`ConfigError` naming the
variable to set.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from carrier.errors import ConfigError
from carrier.memory.base import Store
from carrier.types import utcnow
from clients.instagram.base import Publisher
from clients.instagram.config import InstagramConfig
from clients.instagram.quota import PublishCounter

__all__ = ["build_publisher", "fernet_key_from_secret"]


def fernet_key_from_secret(secret: str) -> bytes:
    """A Fernet key derived from ``CARRIER_SECRET_KEY`` (HKDF-SHA256, purpose-bound)."""
    derived = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"carrier:instagrapi-session"
    ).derive(secret.encode())
    return base64.urlsafe_b64encode(derived)


def _secret(character: Any, name: str, environ: Mapping[str, str], why: str) -> str:
    value = character.resolve_secret(name, environ)
    if not value:
        raise ConfigError(
            f"{name} is not set: {why}. Put it in the environment or .env and reference it in "
            f"the character as settings.secrets.{name}: ${name}"
        )
    return str(value)


def build_publisher(
    *,
    character: Any,
    config: InstagramConfig,
    store: Store,
    environ: Mapping[str, str],
    fernet_key: bytes | str | None = None,
    clock: Callable[[], datetime] = utcnow,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    client_factory: Callable[[], Any] | None = None,
) -> Publisher:
    """The publisher ``config.publisher`` names, wired to ``store`` for its persisted state."""
    agent_id = str(character.agent_id)
    counter = PublishCounter(
        store, f"instagram:{agent_id}:published", limit=config.daily_limit, clock=clock
    )
    if config.publisher == "graph":
        return _graph(character, config, environ, counter, clock=clock, sleep=sleep)
    from clients.instagram.private import InstagrapiPublisher, default_client_factory

    if fernet_key is None:
        secret = environ.get("CARRIER_SECRET_KEY")
        if not secret:
            raise ConfigError(
                "the instagrapi publisher stores its session encrypted and needs "
                "CARRIER_SECRET_KEY (or a key passed in by the caller)"
            )
        fernet_key = fernet_key_from_secret(secret)
    why = "the instagrapi publisher logs in with the account's username and password"
    return InstagrapiPublisher(
        username=_secret(character, "INSTAGRAM_USERNAME", environ, why),
        password=_secret(character, "INSTAGRAM_PASSWORD", environ, why),
        totp_seed=character.resolve_secret("INSTAGRAM_TOTP_SEED", environ) or None,
        store=store,
        agent_id=agent_id,
        fernet_key=fernet_key,
        settings=config.instagrapi,
        counter=counter,
        client_factory=client_factory or default_client_factory,
        clock=clock,
    )


def _graph(
    character: Any,
    config: InstagramConfig,
    environ: Mapping[str, str],
    counter: PublishCounter,
    *,
    clock: Callable[[], datetime],
    sleep: Callable[[float], Awaitable[None]],
) -> Publisher:
    from clients.instagram.ftp import FtpMediaHost
    from clients.instagram.graph import GraphAPI, GraphPublisher

    if config.ftp is None:
        raise ConfigError(
            "clientConfig.instagram.ftp is missing: the graph publisher needs an FTP media host "
            "(host, user, directory, baseUrl) because Instagram fetches media by public URL; "
            "add an ftp section, or set publisher: instagrapi"
        )
    token = _secret(
        character, "INSTAGRAM_ACCESS_TOKEN", environ, "the Graph API publisher needs a User token"
    )
    ig_user_id = config.ig_user_id or _secret(
        character,
        "INSTAGRAM_BUSINESS_ACCOUNT_ID",
        environ,
        "the Graph API publisher needs the Instagram professional account id (or set igUserId)",
    )
    password = _secret(
        character, config.ftp.password_secret, environ, "the FTP media host needs its password"
    )
    host = FtpMediaHost.from_settings(
        config.ftp,
        user=character.resolve_secret("FTP_USER", environ),
        password=password,
        timeout=config.request_timeout,
        sleep=sleep,
    )
    api = GraphAPI(
        access_token=token,
        ig_user_id=ig_user_id,
        base_url=config.graph_base_url,
        version=config.graph_api_version,
        timeout=config.request_timeout,
    )
    return GraphPublisher(
        api=api,
        host=host,
        counter=counter,
        delete_after_publish=config.ftp.delete_after_publish,
        check_urls=config.ftp.check_url,
        poll_interval=config.poll_interval,
        poll_max_interval=config.poll_max_interval,
        poll_timeout=config.poll_timeout,
        clock=clock,
        sleep=sleep,
    )
