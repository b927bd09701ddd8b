"""A loopback Discord (REST + gateway) that real discord.py talks to: see :class:`FakeDiscord`.

Shipped with the client, like httpx's ``MockTransport``, for tests and benchmarks.
"""

from __future__ import annotations

from clients.discord.fake.rest import Sent
from clients.discord.fake.server import FakeDiscord, Guild

__all__ = ["FakeDiscord", "Guild", "Sent"]
