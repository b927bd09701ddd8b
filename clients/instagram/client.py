"""``InstagramClient``: the Client-contract face of the Instagram adapter.

Instagram posting is driven by jobs (a posting plan, approvals), not by a live connection, so
the client mostly holds the publisher for its agent: :meth:`publish` is what a job handler
calls. ``start`` builds the publisher (resolving secrets; nothing is sent to Instagram),
``stop`` closes its connections.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from carrier.clients import Client
from clients.instagram.base import Publisher
from clients.instagram.config import InstagramConfig
from clients.instagram.factory import build_publisher
from clients.instagram.post import Post, PublishResult, PublishStates
from clients.instagram.publish import publish_post

__all__ = ["InstagramClient"]

log = logging.getLogger(__name__)


class InstagramClient(Client):
    """The Instagram adapter for one agent."""

    name = "instagram"

    def __init__(
        self,
        *,
        runtime: Any,
        config: InstagramConfig,
        environ: Mapping[str, str],
        fernet_key: bytes | str | None = None,
        work_dir: Path | None = None,
        publisher: Publisher | None = None,
    ) -> None:
        self.runtime = runtime
        self.config = config
        self._environ = environ
        self._fernet_key = fernet_key
        self.work_dir = work_dir
        self.publisher = publisher
        self.states = PublishStates(runtime.store, str(runtime.character.agent_id))

    async def start(self) -> None:
        if self.publisher is None:
            self.publisher = build_publisher(
                character=self.runtime.character,
                config=self.config,
                store=self.runtime.store,
                environ=self._environ,
                fernet_key=self._fernet_key,
            )
        log.info(
            "instagram client ready for %s (%s publisher%s)",
            self.runtime.character.name,
            self.publisher.name,
            ", dry run" if self.config.dry_run else "",
        )

    async def stop(self) -> None:
        if self.publisher is not None:
            await self.publisher.aclose()

    async def publish(self, post: Post, *, dry_run: bool | None = None) -> PublishResult:
        """Publish ``post`` exactly once per ``post.key`` (see :func:`publish_post`)."""
        if self.publisher is None:
            await self.start()
        assert self.publisher is not None
        return await publish_post(
            post,
            publisher=self.publisher,
            states=self.states,
            config=self.config,
            work_dir=self.work_dir,
            dry_run=dry_run,
        )
