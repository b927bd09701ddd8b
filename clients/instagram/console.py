"""What the Instagram adapter offers the web console (the ``carrier.console`` entry point): the
account's publishing quota, and a draft's image converted exactly as it will be uploaded.

Quota: where the publisher is ``graph``, the Graph API's ``content_publishing_limit`` edge
(Instagram's own count, which includes posts made elsewhere), asked through the running
client's API, or, in a process that does not run the client (a web process), through one
made from the agent's secrets when they are set here; kept for a minute, and asked again at
once when Carrier has published since. Otherwise, or when Instagram cannot be asked (the reason
is in the note), the posts Carrier recorded in the last 24 h (the publishers' own counter).

Preview: :func:`~clients.instagram.media.prepare_image` with the agent's ``fit`` and
``background``, as :func:`~clients.instagram.publish.prepare_post` converts before an upload;
the last few results are kept, keyed by the file's path, size and modification time.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from carrier.console import NoPreview, Preview, PreviewRefused, Quota
from carrier.errors import CarrierError
from clients.instagram.config import InstagramConfig, parse_config
from clients.instagram.errors import InstagramError, MediaRejected
from clients.instagram.graph.api import GraphAPI, PublishingLimit, UnclearResponse
from clients.instagram.library import post_kind_of
from clients.instagram.media import ImageRules, prepare_image
from clients.instagram.post import PostKind
from clients.instagram.publish import image_rules
from clients.instagram.quota import PublishCounter

__all__ = ["InstagramConsole", "provider"]

log = logging.getLogger(__name__)

QUOTA_TTL_S = 60.0
"""How long Instagram's figure is kept (the Graph API rate-limits calls per account)."""
ASK_TIMEOUT_S = 10.0
"""How long the console waits for Instagram's figure before it shows Carrier's."""
PREVIEWS_KEPT = 16
_DAY_S = 86_400


class InstagramConsole:
    """The provider, bound to the host's agent manager."""

    name = "instagram"

    def __init__(self, manager: Any, *, clock: Callable[[], float] = time.monotonic) -> None:
        from clients.instagram.jobs import POST_JOB_KIND, PUBLISH_JOB_KIND

        self.manager = manager
        self.job_kinds = frozenset({POST_JOB_KIND, PUBLISH_JOB_KIND})
        self._clock = clock
        self._limits: dict[str, tuple[float, int, PublishingLimit]] = {}
        self._previews: OrderedDict[tuple[Any, ...], Preview] = OrderedDict()

    # -- quota --------------------------------------------------------------------------------
    async def quota(self, agent_id: str) -> Quota | None:
        found = await self._config(agent_id)
        if found is None:
            return None
        character, config = found
        client = self.manager.client(agent_id, "instagram")
        publisher = getattr(client, "publisher", None)
        counter = getattr(publisher, "counter", None)
        if not isinstance(counter, PublishCounter):  # as build_publisher keys it
            counter = PublishCounter(
                self.manager.store, f"instagram:{agent_id}:published", limit=config.daily_limit
            )
        times = await counter.times()
        counted = len(times)
        next_free = times[0] + counter.window if times else None
        note = None
        if config.publisher == "graph":
            try:
                limit = await asyncio.wait_for(
                    self._graph_limit(agent_id, counted, publisher, character, config),
                    ASK_TIMEOUT_S,
                )
            except TimeoutError:
                note = (
                    f"Instagram did not answer within {ASK_TIMEOUT_S:.0f} s; showing the posts "
                    "Carrier recorded instead (Update again later)"
                )
            except (InstagramError, UnclearResponse, CarrierError) as exc:
                note = (
                    f"Instagram's own count could not be read ({exc}); showing the posts Carrier "
                    "recorded instead"
                )
                log.info("instagram: %s: publishing limit not read: %s", agent_id, exc)
            else:
                return Quota(
                    client=self.name,
                    what="posts",
                    used=limit.usage,
                    limit=limit.total,
                    window_s=limit.duration or _DAY_S,
                    source="platform",
                    carrier_used=counted,
                    carrier_limit=counter.limit,
                    next_free_at=next_free,
                )
        return Quota(
            client=self.name,
            what="posts",
            used=counted,
            limit=counter.limit,
            window_s=int(counter.window / timedelta(seconds=1)),
            source="carrier",
            carrier_used=counted,
            carrier_limit=counter.limit,
            next_free_at=next_free,
            note=note,
        )

    async def _graph_limit(
        self,
        agent_id: str,
        counted: int,
        publisher: Any,
        character: Any,
        config: InstagramConfig,
    ) -> PublishingLimit:
        kept = self._limits.get(agent_id)
        # Kept a minute, unless Carrier published since: then Instagram's count moved too.
        if kept is not None and self._clock() - kept[0] < QUOTA_TTL_S and kept[1] == counted:
            return kept[2]
        api = getattr(publisher, "api", None)
        if isinstance(api, GraphAPI):
            limit = await api.publishing_limit()
        else:
            limit = await self._ask_with_secrets(character, config)
        self._limits[agent_id] = (self._clock(), counted, limit)
        return limit

    async def _ask_with_secrets(self, character: Any, config: InstagramConfig) -> PublishingLimit:
        """Instagram's figure from a process that does not run the client (a web process)."""
        environ = getattr(self.manager, "environ", {})
        token = character.resolve_secret("INSTAGRAM_ACCESS_TOKEN", environ)
        account = config.ig_user_id or character.resolve_secret(
            "INSTAGRAM_BUSINESS_ACCOUNT_ID", environ
        )
        if not token or not account:
            missing = "INSTAGRAM_ACCESS_TOKEN" if not token else "INSTAGRAM_BUSINESS_ACCOUNT_ID"
            raise InstagramError(
                f"this process does not run the agent's Instagram client and has no {missing}; "
                "set it here, or read the figure from the process that runs the client"
            )
        api = GraphAPI(
            access_token=token,
            ig_user_id=account,
            base_url=config.graph_base_url,
            version=config.graph_api_version,
            timeout=min(config.request_timeout, ASK_TIMEOUT_S),
        )
        try:
            return await api.publishing_limit()
        finally:
            await api.aclose()

    # -- preview ------------------------------------------------------------------------------
    async def preview(self, agent_id: str, payload: Mapping[str, Any], index: int) -> Preview:
        draft = payload.get("draft")
        if not isinstance(draft, Mapping):
            raise NoPreview("the job has no draft")
        media = draft.get("media")
        if not isinstance(media, list) or index >= len(media) or not isinstance(media[index], str):
            raise NoPreview(f"the draft has no media number {index}")
        path = Path(media[index])
        if draft.get("kind") == PostKind.REEL or post_kind_of(path) is PostKind.REEL:
            raise NoPreview(
                f"{path.name} is a video: it is uploaded as it is (checked, not converted), "
                "so there is no still preview"
            )
        found = await self._config(agent_id)
        rules = image_rules(found[1] if found is not None else InstagramConfig())
        try:
            stat = await asyncio.to_thread(path.stat)
        except OSError:
            raise NoPreview(
                f"{path.name} is gone from the server (moved or deleted): put it back, or reject "
                "this draft"
            ) from None
        key = (str(path), stat.st_size, stat.st_mtime_ns, rules)
        shown = self._previews.get(key)
        if shown is None:
            shown = await asyncio.to_thread(_convert, path, rules)
            self._previews[key] = shown
            while len(self._previews) > PREVIEWS_KEPT:
                self._previews.popitem(last=False)
        self._previews.move_to_end(key)
        return shown

    # -- helpers ------------------------------------------------------------------------------
    async def _config(self, agent_id: str) -> tuple[Any, InstagramConfig] | None:
        """The agent's character and effective Instagram configuration, or ``None`` when it
        does not use Instagram (or its character cannot be read)."""
        try:
            character = await self.manager.character(agent_id)
            if "instagram" not in character.clients:
                return None
            client = self.manager.client(agent_id, "instagram")
            config = getattr(client, "config", None)
            if not isinstance(config, InstagramConfig):
                config = parse_config(
                    await self.manager.effective_client_config(agent_id, "instagram")
                )
        except CarrierError as exc:
            log.info("instagram: %s: no console figures (%s)", agent_id, exc)
            return None
        return character, config


def _convert(path: Path, rules: ImageRules) -> Preview:
    with tempfile.TemporaryDirectory(prefix="carrier-ig-preview-") as tmp:
        try:
            prepared = prepare_image(path, tmp, rules, stem="preview")
        except MediaRejected as exc:
            raise PreviewRefused(
                f"Instagram would refuse {path.name}: {exc.reason}; replace the file, or reject "
                "this draft"
            ) from None
        data = prepared.path.read_bytes()
    return Preview(
        name=path.name,
        data=data,
        media_type=prepared.content_type,
        width=prepared.width,
        height=prepared.height,
        changes=prepared.changes,
    )


def provider(manager: Any) -> InstagramConsole:
    """The ``carrier.console`` factory."""
    return InstagramConsole(manager)
