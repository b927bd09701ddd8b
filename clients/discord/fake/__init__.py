"""A loopback Discord (REST + gateway) that real discord.py talks to: see :class:`FakeDiscord`.

Shipped with the client, like httpx's ``MockTransport``, for tests and benchmarks.
"""

from __future__ import annotations

from clients.discord.fake.rest import Sent
from clients.discord.fake.server import FakeDiscord, Guild
from clients.discord.fake.world import Bot

__all__ = ["Bot", "FakeDiscord", "Guild", "Sent"]
