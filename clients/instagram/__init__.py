"""The Instagram client: scheduled posts through the Graph API (media on FTP) or instagrapi.

Registered under the ``carrier.clients`` entry-point group as ``instagram``. A job handler
publishes with :func:`publish_post` (or :meth:`InstagramClient.publish`), which is idempotent
per ``Post.key`` and says what to do next through its exceptions (see
:mod:`clients.instagram.errors`)::

    try:
        result = await publish_post(post, publisher=publisher, states=states, config=config)
    except RetryLater as wait:           # quota, cooldown, container still processing
        ...wait until wait.retry_at without consuming an attempt
    except PublishUncertain:             # safe to run again: it checks before publishing
        ...retry later
    return result.model_dump(mode="json")

Scheduled posting (posting plans, drafts, approval) is in :mod:`clients.instagram.plan` and
:mod:`clients.instagram.jobs`; the host registers the job handlers with
``register_instagram_jobs(service, manager)``.

Importing this package imports neither instagrapi nor aioftp.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from carrier.clients import ClientUnavailable
from carrier.errors import ConfigError
from carrier.install import install_hint
from clients.instagram.base import PreparedPost, Publisher
from clients.instagram.client import InstagramClient
from clients.instagram.config import InstagramConfig, parse_config
from clients.instagram.errors import (
    CaptionRejected,
    ContainerFailed,
    CoolingDown,
    InstagramError,
    MediaRejected,
    OperatorActionRequired,
    PublishUncertain,
    QuotaExceeded,
    RetryLater,
)
from clients.instagram.factory import build_publisher, fernet_key_from_secret
from clients.instagram.plan import PostingPlan
from clients.instagram.post import Phase, Post, PostKind, PublishResult, PublishState, PublishStates
from clients.instagram.publish import prepare_post, publish_post

__all__ = [
    "CaptionRejected",
    "ContainerFailed",
    "CoolingDown",
    "InstagramClient",
    "InstagramConfig",
    "InstagramError",
    "MediaRejected",
    "OperatorActionRequired",
    "Phase",
    "Post",
    "PostKind",
    "PostingPlan",
    "PreparedPost",
    "PublishResult",
    "PublishState",
    "PublishStates",
    "PublishUncertain",
    "Publisher",
    "QuotaExceeded",
    "RetryLater",
    "build_publisher",
    "create_client",
    "fernet_key_from_secret",
    "parse_config",
    "prepare_post",
    "publish_post",
]


def create_client(
    runtime: Any,
    config: Mapping[str, Any],
    environ: Mapping[str, str],
    *,
    fernet_key: bytes | str | None = None,
) -> InstagramClient:
    """The ``carrier.clients`` factory. Raises :class:`ClientUnavailable` saying what is missing
    (a secret, the FTP section, the SDK) so ``carrier run`` can report and skip it."""
    try:
        parsed = parse_config(config)
        client = InstagramClient(
            runtime=runtime, config=parsed, environ=environ, fernet_key=fernet_key
        )
        client.publisher = build_publisher(
            character=runtime.character,
            config=parsed,
            store=runtime.store,
            environ=environ,
            fernet_key=fernet_key,
        )
    except ConfigError as exc:
        raise ClientUnavailable(str(exc)) from exc
    except ImportError as exc:
        what = exc.name or "its dependencies"
        raise ClientUnavailable(
            f"the Instagram client needs {what}, which is not installed: {install_hint(what)}"
        ) from exc
    return client


# What POST /clients/instagram/config (and the console) validate a configuration against.
create_client.config_model = InstagramConfig  # type: ignore[attr-defined]
