"""The requests transport of :class:`~clients.instagram.fake.private.FakeInstagram`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import requests
from requests.adapters import BaseAdapter
from requests.models import PreparedRequest
from requests.structures import CaseInsensitiveDict

if TYPE_CHECKING:
    from clients.instagram.fake.private import FakeInstagram

__all__ = ["WorldAdapter", "form_fields"]


def form_fields(request: PreparedRequest) -> dict[str, str]:
    body = request.body
    if isinstance(body, bytes):
        try:
            body = body.decode()
        except UnicodeDecodeError:
            return {}
    if not isinstance(body, str):
        return {}
    return {k: v[-1] for k, v in parse_qs(body).items()}


class WorldAdapter(BaseAdapter):
    """A requests transport that hands every request to the fake world."""

    def __init__(self, world: FakeInstagram) -> None:
        super().__init__()
        self.world = world

    def send(self, request: PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        status, body, headers = self.world.answer(request)
        if status == 0:
            raise requests.ConnectionError("Connection reset by peer (fake)", request=request)
        response = requests.Response()
        response.status_code = status
        response.reason = "OK" if status == 200 else "Error"
        response.url = request.url or ""
        response.request = request
        response.headers = CaseInsensitiveDict({"Content-Type": "application/json", **headers})
        response._content = json.dumps(body).encode()
        response.encoding = "utf-8"
        return response

    def close(self) -> None:
        pass
