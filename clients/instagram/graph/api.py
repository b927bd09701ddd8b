"""A thin async client for the Instagram Graph API's content publishing endpoints.

It sends the access token in the ``Authorization`` header (never in a URL, so it cannot leak into
logs) and masks it in every message anyway. Failures come in two kinds: :class:`GraphAPIError`
(the API answered with an error: nothing happened) and :class:`UnclearResponse` (a timeout, a
dropped connection or a 5xx: the request may or may not have taken effect).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from clients.instagram.errors import GraphAPIError

__all__ = ["ContainerStatus", "GraphAPI", "PublishingLimit", "UnclearResponse", "parse_timestamp"]

_TRANSIENT_CODES = {1, 2}  # "API unknown" / "API service": temporary, per the error guide
_MEDIA_FIELDS = "id,caption,permalink,timestamp"


class UnclearResponse(Exception):
    """The request may or may not have taken effect (timeout, reset, 5xx, transient error)."""


@dataclass(frozen=True, slots=True)
class ContainerStatus:
    code: str
    """``IN_PROGRESS``, ``FINISHED``, ``PUBLISHED``, ``ERROR`` or ``EXPIRED``."""
    message: str | None = None
    """The ``status`` field: for ``ERROR``, what went wrong."""


@dataclass(frozen=True, slots=True)
class PublishingLimit:
    usage: int
    total: int | None
    duration: int | None


def parse_timestamp(value: str) -> datetime | None:
    """Graph API timestamps look like ``2024-05-01T10:00:00+0000``."""
    for fmt in ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S.%f%z"):
        try:
            return datetime.strptime(value, fmt)
        except ValueError:
            continue
    return None


class GraphAPI:
    """Calls for one Instagram professional account (``ig_user_id``)."""

    def __init__(
        self,
        *,
        access_token: str,
        ig_user_id: str,
        base_url: str = "https://graph.facebook.com",
        version: str = "v21.0",
        http: httpx.AsyncClient | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._token = access_token
        self.ig_user_id = ig_user_id
        self.root = f"{base_url.rstrip('/')}/{version}"
        self._http = http or httpx.AsyncClient(timeout=timeout)
        self._own_http = http is None

    def __repr__(self) -> str:
        return f"GraphAPI(ig_user_id={self.ig_user_id!r}, root={self.root!r})"

    def mask(self, text: str) -> str:
        """``text`` with the access token replaced by ``***``."""
        return text.replace(self._token, "***") if self._token else text

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()

    # -- endpoints -----------------------------------------------------------------------------
    async def create_image(
        self, image_url: str, *, caption: str | None = None, carousel_item: bool = False
    ) -> str:
        data: dict[str, str] = {"image_url": image_url}
        if carousel_item:
            data["is_carousel_item"] = "true"
        elif caption:
            data["caption"] = caption
        return str((await self._call("POST", f"{self.ig_user_id}/media", data=data))["id"])

    async def create_carousel(self, children: list[str], *, caption: str | None) -> str:
        data = {"media_type": "CAROUSEL", "children": ",".join(children)}
        if caption:
            data["caption"] = caption
        return str((await self._call("POST", f"{self.ig_user_id}/media", data=data))["id"])

    async def create_reel(
        self,
        video_url: str,
        *,
        caption: str | None,
        cover_url: str | None = None,
        share_to_feed: bool = True,
    ) -> str:
        data = {
            "media_type": "REELS",
            "video_url": video_url,
            "share_to_feed": "true" if share_to_feed else "false",
        }
        if caption:
            data["caption"] = caption
        if cover_url:
            data["cover_url"] = cover_url
        return str((await self._call("POST", f"{self.ig_user_id}/media", data=data))["id"])

    async def container_status(self, container_id: str) -> ContainerStatus:
        """``GET /{container-id}?fields=id,status_code,status``: an IG Container says whether it
        was published (``PUBLISHED``), never which media it became."""
        body = await self._call("GET", container_id, params={"fields": "id,status_code,status"})
        return ContainerStatus(str(body.get("status_code", "")), body.get("status"))

    async def publish(self, container_id: str) -> str:
        data = {"creation_id": container_id}
        return str((await self._call("POST", f"{self.ig_user_id}/media_publish", data=data))["id"])

    async def account(self) -> dict[str, Any]:
        """The professional account itself (``id``, ``username``): whether the token may read it."""
        return await self._call("GET", self.ig_user_id, params={"fields": "id,username"})

    async def publishing_limit(self) -> PublishingLimit:
        body = await self._call(
            "GET",
            f"{self.ig_user_id}/content_publishing_limit",
            params={"fields": "quota_usage,config"},
        )
        entry = (body.get("data") or [{}])[0]
        config = entry.get("config") or {}
        return PublishingLimit(
            usage=int(entry.get("quota_usage") or 0),
            total=config.get("quota_total"),
            duration=config.get("quota_duration"),
        )

    async def permalink(self, media_id: str) -> str | None:
        body = await self._call("GET", media_id, params={"fields": "id,permalink"})
        return body.get("permalink")

    async def media(self, media_id: str) -> dict[str, Any]:
        """One IG Media: ``id``, ``caption``, ``permalink``, ``timestamp``."""
        return await self._call("GET", media_id, params={"fields": _MEDIA_FIELDS})

    async def recent_media(self, limit: int = 10) -> list[dict[str, Any]]:
        """The account's newest media (``GET /{ig-user-id}/media``), newest first."""
        body = await self._call(
            "GET",
            f"{self.ig_user_id}/media",
            params={"fields": _MEDIA_FIELDS, "limit": str(limit)},
        )
        return list(body.get("data") or [])

    async def discovered_media(self, username: str, limit: int = 10) -> list[dict[str, Any]]:
        """The newest media of the account ``username`` through business discovery
        (``GET /{ig-user-id}?fields=business_discovery.username(...){media{...}}``), newest
        first: a second way to list the account's own media when its media list is not
        available."""
        fields = (
            f"business_discovery.username({username}){{media.limit({limit}){{{_MEDIA_FIELDS}}}}}"
        )
        body = await self._call("GET", self.ig_user_id, params={"fields": fields})
        found = body.get("business_discovery") or {}
        return list((found.get("media") or {}).get("data") or [])

    # -- transport -----------------------------------------------------------------------------
    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        data: dict[str, str] | None = None,
        json: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        url = f"{self.root}/{path}"
        try:
            response = await self._http.request(
                method,
                url,
                params=params,
                data=data,
                json=json,
                headers={"Authorization": f"Bearer {self._token}"},
            )
        except httpx.TransportError as exc:  # timeouts, resets, refused connections
            raise UnclearResponse(
                self.mask(f"{method} {path}: {type(exc).__name__}: {exc}")
            ) from None
        try:
            body = response.json()
        except ValueError:
            body = {}
        error = body.get("error") if isinstance(body, dict) else None
        if response.status_code >= 500:
            detail = (error or {}).get("message") or response.text[:200]
            raise UnclearResponse(
                self.mask(f"{method} {path}: HTTP {response.status_code}: {detail}")
            )
        if error or response.status_code >= 400:
            error = error or {"message": response.text[:200] or response.reason_phrase}
            if error.get("is_transient") or error.get("code") in _TRANSIENT_CODES:
                raise UnclearResponse(self.mask(f"{method} {path}: {error.get('message')}"))
            message = str(error.get("message") or "unknown error")
            if error.get("error_user_msg"):
                message += f" ({error['error_user_msg']})"
            raise GraphAPIError(
                self.mask(message),
                status=response.status_code,
                code=error.get("code"),
                subcode=error.get("error_subcode"),
                fbtrace_id=error.get("fbtrace_id"),
            )
        if not isinstance(body, dict):
            raise UnclearResponse(f"{method} {path}: the answer was not a JSON object")
        return body
