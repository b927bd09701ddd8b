"""Instagram errors, split by what the caller (a job handler) must do with them.

- :class:`RetryLater` (``QuotaExceeded``, ``CoolingDown``, ``ContainerNotReady``): nothing went
  wrong with the post; run the job again at ``retry_at`` without consuming an attempt.
- :class:`PublishUncertain`: the post may or may not be out; running :func:`publish_post` again is
  safe, because it checks before it publishes.
- :class:`MediaRejected`, :class:`CaptionRejected`: the input cannot be posted; a human fixes it.
- :class:`OperatorActionRequired`: the account needs a human (challenge, two-factor, password).
- everything else (:class:`GraphAPIError`, :class:`ContainerFailed`, :class:`MediaHostError`):
  a clear failure with the platform's own message.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from carrier.errors import ClientError, UserError

__all__ = [
    "CaptionRejected",
    "ContainerFailed",
    "ContainerNotReady",
    "CoolingDown",
    "GraphAPIError",
    "InstagramError",
    "MediaHostError",
    "MediaRejected",
    "OperatorActionRequired",
    "PublishUncertain",
    "QuotaExceeded",
    "RetryLater",
]


class InstagramError(ClientError):
    """Base class of the runtime failures of the Instagram client."""


class RetryLater(InstagramError):
    """Not a failure: try again at ``retry_at`` (the job waits; it is not dropped)."""

    def __init__(self, retry_at: datetime, reason: str) -> None:
        self.retry_at = retry_at
        self.reason = reason
        super().__init__(f"{reason}; retry at {retry_at.isoformat(timespec='seconds')}")


class QuotaExceeded(RetryLater):
    """The account's 24 h publishing limit is reached (locally counted or reported by the API)."""


class CoolingDown(RetryLater):
    """Instagram throttled the account; nothing is sent to it until ``retry_at``."""


class ContainerNotReady(RetryLater):
    """A media container is still processing after the polling budget; resume it later."""

    def __init__(self, retry_at: datetime, container_id: str) -> None:
        self.container_id = container_id
        super().__init__(retry_at, f"media container {container_id} is still processing")


class PublishUncertain(InstagramError):
    """A publish call failed without a clear answer and the outcome could not be checked yet.

    Calling :func:`~clients.instagram.publish_post` again is safe: it reads the container status
    (or the account's recent media) before it publishes anything.
    """

    def __init__(self, message: str, *, container_id: str | None = None) -> None:
        self.container_id = container_id
        super().__init__(message)


class GraphAPIError(InstagramError):
    """The Graph API answered with an error (its message, code and subcode are kept)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: int | None = None,
        subcode: int | None = None,
        fbtrace_id: str | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.subcode = subcode
        self.fbtrace_id = fbtrace_id
        self.api_message = message
        parts = [f"HTTP {status}" if status else None, f"code {code}" if code else None]
        if subcode:
            parts.append(f"subcode {subcode}")
        if fbtrace_id:
            parts.append(f"fbtrace_id {fbtrace_id}")
        detail = ", ".join(p for p in parts if p)
        super().__init__(f"Graph API error: {message}" + (f" ({detail})" if detail else ""))


class ContainerFailed(InstagramError):
    """A media container ended in ``ERROR`` or ``EXPIRED``; it can never be published."""

    def __init__(self, container_id: str, status_code: str, message: str | None) -> None:
        self.container_id = container_id
        self.status_code = status_code
        self.api_message = message
        self.resumed = False
        """The container came from an earlier run (set by the publisher)."""
        why = f": {message}" if message else ""
        hint = (
            " (containers expire 24 h after creation; the next run prepares the post again)"
            if status_code == "EXPIRED"
            else ""
        )
        super().__init__(f"media container {container_id} ended in {status_code}{why}{hint}")


class MediaHostError(InstagramError):
    """Uploading to the FTP media host failed, or the public URL does not serve the file."""


class OperatorActionRequired(InstagramError):
    """The account needs a human (a challenge, a two-factor code, a new password).

    The message says exactly what to do; retrying before that only makes things worse.
    """


class MediaRejected(UserError):
    """A media file cannot be posted and cannot be fixed automatically; nothing was uploaded."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{Path(path).name}: refused before upload: {reason}")


class CaptionRejected(UserError):
    """A caption breaks Instagram's limits in a way that cannot be trimmed safely."""
