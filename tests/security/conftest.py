"""The security tests attack the real parts, so they share the fixtures of the parts they attack:
the agent API's (a SQLite store, a function model, the app behind an httpx client) and the
Discord client's (a real discord.py client against the loopback FakeDiscord)."""

from __future__ import annotations

from tests.api.conftest import (  # noqa: F401 - fixtures
    api_settings,
    client,
    make_client,
    make_manager,
    manager,
    model,
    settings,
    store,
)
from tests.clients.discord.conftest import harness  # noqa: F401 - fixture
from tests.security._tools_world import world  # noqa: F401 - fixture
from tests.security.audit_support import (  # noqa: F401 - fixtures
    audit,
    audit_factory,
)
