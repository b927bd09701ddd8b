"""Fakes shipped with the Instagram client, for tests and local runs: a loopback Graph API and
an Instagram private API behind instagrapi's own HTTP sessions (in-process, or served over
loopback to instagrapi in another process: :mod:`.private_http`)."""

from __future__ import annotations

from clients.instagram.fake._conversations import FakeComment, FakeMessage
from clients.instagram.fake._webhooks import sign
from clients.instagram.fake.graph import FakeContainer, FakeGraphAPI

__all__ = ["FakeComment", "FakeContainer", "FakeGraphAPI", "FakeMessage", "sign"]
