"""A loopback stand-in for the Instagram Graph API's content publishing endpoints.

It implements what :class:`~clients.instagram.graph.GraphAPI` calls (create container, status,
publish, ``content_publishing_limit``, a media's fields, the media list, business discovery of
the account itself) with the documented error JSON, checks the bearer token, and serves a
directory (the FTP server's root) as static files under ``/media/`` so the media host's URL check
and the container's "fetch" work end to end.

Faults are scripted on the instance: containers that end in ERROR or EXPIRED, polls that stay
IN_PROGRESS, a full quota, publishes that go through but answer with a dropped connection or
a 500, a media list that is unavailable or lags (:attr:`FakeGraphAPI.media_list`), and a little
latency on every call (:attr:`FakeGraphAPI.latency_s`), so the "unclear failure" and recovery
paths can be tested without timing. It is thread-safe: several worker processes may use it.

Conversations (comments, replies, mentions, hides, DMs with the messaging window) are served by
:attr:`FakeGraphAPI.conversations`, and webhook notifications of them are delivered, signed, by
:attr:`FakeGraphAPI.webhooks`.
"""

from __future__ import annotations

import itertools
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

from clients.instagram.fake._conversations import Conversations
from clients.instagram.fake._graph_http import GraphHandler, graph_error
from clients.instagram.fake._webhooks import WebhookSender

__all__ = ["FakeContainer", "FakeGraphAPI", "graph_error"]

PublishFault = Literal["drop_after_publish", "500_after_publish", "drop_before_publish"]
MediaList = Literal["on", "off", "stale"]

_DISCOVERY = re.compile(r"business_discovery\.username\(([^)]*)\)(?:\{media(?:\.limit\((\d+)\))?)?")


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A caller that went away mid-answer (a killed worker) is not the fake's error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass
class FakeContainer:
    id: str
    params: dict[str, str]
    status_code: str = "FINISHED"
    status: str | None = None
    polls_in_progress: int = 0
    media_id: str | None = None


@dataclass
class FakeGraphState:
    containers: dict[str, FakeContainer] = field(default_factory=dict)
    media: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    publish_calls: int = 0


class FakeGraphAPI:
    """``with FakeGraphAPI(token=..., static_root=...) as fake:`` then point GraphAPI at ``fake.url``."""

    def __init__(
        self,
        *,
        token: str = "test-token",
        ig_user_id: str = "17841400000000001",
        username: str = "fake_account",
        static_root: Path | None = None,
        version: str = "v21.0",
        app_secret: str = "fake-app-secret",
    ) -> None:
        self.token = token
        self.ig_user_id = ig_user_id
        self.username = username
        self.static_root = static_root
        self.version = version
        self.state = FakeGraphState()
        self.quota_usage = 0
        self.quota_total = 50
        self.next_status: tuple[str, str | None] | None = None
        """The next container created ends in this (status_code, status message)."""
        self.in_progress_polls = 0
        """Each new container answers IN_PROGRESS this many times before its final status."""
        self.publish_faults: list[PublishFault] = []
        """Consumed one per media_publish call."""
        self.media_list: MediaList = "on"
        """``GET /{ig-user-id}/media``: ``on``; ``off`` answers the error of an endpoint the app
        may not use; ``stale`` answers an empty list (it does not list new posts yet)."""
        self.business_discovery = True
        """Whether business discovery (of the account's own username) answers."""
        self.latency_s = 0.0
        """Seconds every API call waits before it is handled (the network, the platform)."""
        self.publish_answer_delay_s = 0.0
        """Seconds a media_publish waits after the post went live before it answers: the
        window in which a caller that dies knows nothing of the post."""
        self.answering = 0
        """media_publish calls that published and have not answered yet."""
        self._ids = itertools.count(17900000000000001)
        self._lock = threading.Lock()
        self.conversations = Conversations(
            owner_id=ig_user_id, owner_username=username, new_id=self._new_id, lock=self._lock
        )
        """Comments, mentions, replies, hides and DMs (:mod:`~clients.instagram.fake._conversations`)."""
        self.webhooks = WebhookSender(ig_user_id=ig_user_id, app_secret=app_secret)
        """Signed webhook deliveries to a subscriber (:mod:`~clients.instagram.fake._webhooks`)."""
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> FakeGraphAPI:
        handler = type("Handler", (GraphHandler,), {"fake": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None, "use the fake as a context manager"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def media_url(self) -> str:
        """Public base URL of ``static_root`` (use it as the FTP host's ``base_url``)."""
        return f"{self.url}/media"

    # -- what tests look at --------------------------------------------------------------------
    @property
    def published(self) -> list[dict[str, Any]]:
        return list(self.state.media)

    @property
    def publish_calls(self) -> int:
        return self.state.publish_calls

    @property
    def containers(self) -> dict[str, FakeContainer]:
        return dict(self.state.containers)

    def add_media(self, caption: str = "") -> str:
        """A post already on the account (made outside the fake's publishing); its id."""
        with self._lock:
            media_id = self._new_id()
            self.state.media.append(
                {
                    "id": media_id,
                    "caption": caption,
                    "media_type": "IMAGE",
                    "permalink": f"https://www.instagram.com/p/FAKE{media_id[-6:]}/",
                    "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S+0000"),
                }
            )
            return media_id

    def expire(self, container_id: str) -> None:
        self.state.containers[container_id].status_code = "EXPIRED"

    # -- the API -------------------------------------------------------------------------------
    def _new_id(self) -> str:
        return str(next(self._ids))

    def handle(self, method: str, path: str, params: dict[str, str]) -> tuple[int, Any]:
        parts = [p for p in path.split("/") if p]
        if len(parts) < 2 or parts[0] != self.version:
            return graph_error(400, "Unknown path components", 2500, "OAuthException")
        target, edge = parts[1], (parts[2] if len(parts) > 2 else None)
        if self.latency_s > 0:
            time.sleep(self.latency_s)  # on the request's own thread: calls overlap
        if method == "POST" and edge == "media_publish" and self.publish_answer_delay_s > 0:
            return self._publish_then_wait(target, params)
        talk = self.conversations
        if talk.answer_delay_s > 0 and talk.sends(method, target, edge):
            return talk.answer_late(lambda: self._handle(method, parts, target, edge, params))
        with self._lock:
            if talk.send_faults and talk.sends(method, target, edge):
                return talk.faulty(lambda: self._handle(method, parts, target, edge, params))
            return self._handle(method, parts, target, edge, params)

    def _handle(
        self, method: str, parts: list[str], target: str, edge: str | None, params: dict[str, str]
    ) -> tuple[int, Any]:
        """One request, under the lock."""
        self.state.requests.append((method, "/".join(parts[1:])))
        answer = self.conversations.handle(method, target, edge, params)
        if answer is not None:
            return answer
        if target == self.ig_user_id:
            if method == "POST" and edge == "media":
                return self._create(params)
            if method == "POST" and edge == "media_publish":
                return self._publish(params)
            if method == "GET" and edge == "content_publishing_limit":
                config = {"quota_total": self.quota_total, "quota_duration": 86400}
                return 200, {"data": [{"quota_usage": self.quota_usage, "config": config}]}
            if method == "GET" and edge == "media":
                return self._media_list(params)
            if method == "GET" and edge is None:
                return self._account(params)
        elif method == "GET" and edge is None:
            if target in self.state.containers:
                return self._status(self.state.containers[target])
            for media in self.state.media:
                if media["id"] == target:
                    return 200, _fields(media, params)
        elif (
            method == "GET"
            and edge == "comments"
            and any(media["id"] == target for media in self.state.media)
        ):
            return 200, {"data": []}
        return graph_error(
            400, f"Unsupported {method} request: object '{target}' does not exist", 100
        )

    def _publish_then_wait(self, target: str, params: dict[str, str]) -> tuple[int, Any]:
        with self._lock:
            self.state.requests.append(("POST", f"{target}/media_publish"))
            if target != self.ig_user_id:
                return graph_error(400, f"Unsupported POST request: object '{target}'", 100)
            answer = self._publish(params)
            published = answer[0] == 200
            self.answering += published
        try:
            time.sleep(self.publish_answer_delay_s)
        finally:
            with self._lock:
                self.answering -= published
        return answer

    def _media_list(self, params: dict[str, str]) -> tuple[int, Any]:
        if self.media_list == "off":
            return graph_error(
                400,
                "(#10) Application does not have permission for this action",
                10,
                "OAuthException",
            )
        newest = [] if self.media_list == "stale" else list(reversed(self.state.media))
        limit = int(params.get("limit", "25"))
        return 200, {"data": [_fields(m, params) for m in newest[:limit]]}

    def _account(self, params: dict[str, str]) -> tuple[int, Any]:
        found = _DISCOVERY.search(params.get("fields", ""))
        if found is None:
            return 200, {"id": self.ig_user_id, "username": self.username}
        if not self.business_discovery:
            return graph_error(400, "(#10) Application does not have permission", 10)
        if found.group(1) != self.username:
            return graph_error(400, "Invalid user id", 110, "IGApiException")
        limit = int(found.group(2) or "25")
        newest = list(reversed(self.state.media))[:limit]
        media = [{k: v for k, v in m.items() if k != "media_type"} for m in newest]
        discovered = {"id": self.ig_user_id, "media": {"data": media}}
        return 200, {"business_discovery": discovered, "id": self.ig_user_id}

    def _create(self, params: dict[str, str]) -> tuple[int, Any]:
        media_type = params.get("media_type", "IMAGE")
        if media_type == "CAROUSEL":
            children = [c for c in params.get("children", "").split(",") if c]
            if not 2 <= len(children) <= 10 or any(
                c not in self.state.containers for c in children
            ):
                return graph_error(
                    400, "The carousel needs 2 to 10 valid children", 100, subcode=2207028
                )
        else:
            key = "video_url" if media_type == "REELS" else "image_url"
            if not params.get(key):
                return graph_error(400, f"The parameter {key} is required", 100)
        container = FakeContainer(
            self._new_id(), dict(params), polls_in_progress=self.in_progress_polls
        )
        if media_type != "CAROUSEL" and not self._fetchable(
            params.get("image_url") or params["video_url"]
        ):
            container.status_code, container.status = (
                "ERROR",
                "Error: Media download has failed. The media URI doesn't meet our requirements. (2207052)",
            )
        if self.next_status is not None:
            container.status_code, container.status = self.next_status
            self.next_status = None
        self.state.containers[container.id] = container
        return 200, {"id": container.id}

    def _fetchable(self, url: str) -> bool:
        if self.static_root is None:
            return True
        prefix = self.media_url + "/"
        if not url.startswith(prefix):
            return False
        return (self.static_root / unquote(url[len(prefix) :])).is_file()

    def _status(self, container: FakeContainer) -> tuple[int, Any]:
        code = container.status_code
        if container.polls_in_progress > 0 and code == "FINISHED":
            container.polls_in_progress -= 1
            code = "IN_PROGRESS"
        body = {"id": container.id, "status_code": code}
        if container.status:
            body["status"] = container.status
        return 200, body

    def _publish(self, params: dict[str, str]) -> tuple[int, Any]:
        self.state.publish_calls += 1
        fault = self.publish_faults.pop(0) if self.publish_faults else None
        if fault == "drop_before_publish":
            return 0, None
        container = self.state.containers.get(params.get("creation_id", ""))
        if container is None:
            return graph_error(400, "Media ID is not available", 9007, subcode=2207027)
        if container.status_code == "PUBLISHED":
            return graph_error(400, "The media has already been published", 9007, subcode=2207027)
        if container.status_code != "FINISHED" or container.polls_in_progress:
            return graph_error(400, "Media ID is not available", 9007, subcode=2207027)
        if self.quota_usage >= self.quota_total:
            return graph_error(
                400, "Application request limit reached", 9, subcode=2207042, user_title="Limit"
            )
        media_id = self._new_id()
        self.state.media.append(
            {
                "id": media_id,
                "caption": container.params.get("caption", ""),
                "media_type": container.params.get("media_type", "IMAGE"),
                "permalink": f"https://www.instagram.com/p/FAKE{media_id[-6:]}/",
                "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S+0000"),
            }
        )
        container.status_code, container.media_id = "PUBLISHED", media_id
        self.quota_usage += 1
        if fault == "drop_after_publish":
            return 0, None
        if fault == "500_after_publish":
            return graph_error(
                500, "An unexpected error has occurred. Please retry.", 2, transient=True
            )
        return 200, {"id": media_id}


def _fields(media: dict[str, Any], params: dict[str, str]) -> dict[str, Any]:
    """The fields a request asked for (``id`` always), as the Graph API answers."""
    wanted = {f.strip() for f in params.get("fields", "id,permalink").split(",") if f.strip()}
    return {k: v for k, v in media.items() if k == "id" or k in wanted}
