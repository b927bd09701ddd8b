"""Property-based checks of the whole API against its own OpenAPI schema (schemathesis).

A real uvicorn serves the app on loopback from a thread with its own event loop (the store, the
manager and the server all live in that loop). Every operation gets a bounded, deterministic set
of valid and invalid requests: none may produce a 500, and every response must match the schema
(status code declared, content type, body, headers).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis

from carrier.agents import AgentManager
from carrier.api import ApiSettings, create_app, running_app
from carrier.character import Character
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.settings import load_settings
from tests.api.conftest import ADMIN, CHARACTER, answer, bearer

MAX_EXAMPLES = 25
AGENT_ID = Character.model_validate(CHARACTER).agent_id


class LiveApi:
    """The API on a real uvicorn in a background thread, with the agent AGENT_ID running."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.url = ""
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="live-api", daemon=True)

    def __enter__(self) -> LiveApi:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        self.ensure_agent()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def ensure_agent(self) -> None:
        """Create and start the agent the fixed ``agent_id`` points at (again, if deleted)."""
        with httpx.Client(base_url=self.url, headers=bearer(ADMIN)) as http:
            http.post("/agents", json=CHARACTER)
            http.put(f"/agents/{AGENT_ID}", json=CHARACTER).raise_for_status()
            http.post(f"/agents/{AGENT_ID}/start").raise_for_status()

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        settings = load_settings(
            {"CARRIER_DATA_DIR": str(self.data_dir), "CARRIER_ADMIN_TOKEN": ADMIN}
        )
        limits = ApiSettings(rate_per_minute=600_000, rate_burst=100_000, max_upload_bytes=200_000)
        async with SQLiteStore(path=self.data_dir / "carrier.db") as store:
            manager = AgentManager(
                store=store,
                embedder=HashEmbedder(),
                settings=settings,
                environ={},
                model_factory=lambda character: FunctionModel(answer),
                client_factories={},
            )
            app = create_app(manager, settings, api_settings=limits)
            try:
                async with running_app(app) as url:
                    self.url = url
                    self._ready.set()
                    await self._stop.wait()
            finally:
                await manager.close()


@pytest.fixture(scope="module")
def live_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApi]:
    with LiveApi(tmp_path_factory.mktemp("live-api")) as api:
        yield api


def _openapi() -> dict[str, Any]:
    """The app's schema; building the app touches no store, so an unopened one will do."""
    settings = load_settings({"CARRIER_DATA_DIR": "/nonexistent", "CARRIER_ADMIN_TOKEN": ADMIN})
    manager = AgentManager(
        store=SQLiteStore(path=Path("/nonexistent/carrier.db")),
        embedder=HashEmbedder(),
        settings=settings,
        environ={},
    )
    return create_app(manager, settings).openapi()


# Path parameters named agent_id point at the live agent, and revision numbers at its first
# revision, so operations reach real code. (A number left to the generator is sent as text, and
# schemathesis 4.32 then takes a negative case of agent_id, pinned here, for one the API wrongly
# accepted.)
schema = schemathesis.openapi.from_dict(
    _openapi(),
    config=schemathesis.Config.from_dict(
        {
            "headers": {"Authorization": f"Bearer {ADMIN}"},
            "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True},
            "parameters": {"agent_id": AGENT_ID, "number": 1},
            # A character file's content cannot be described by a JSON schema (any binary is a
            # "valid" upload): a schema-valid body may still be a 422 with its problems listed.
            "operations": [
                {
                    "include-path-regex": "^/agents(/\\{agent_id\\})?$",
                    "include-method": ["POST", "PUT"],
                    "checks": {
                        "positive_data_acceptance": {
                            "expected-statuses": ["2xx", "401", "403", "404", "409", "422", "429"]
                        }
                    },
                }
            ],
        }
    ),
)


@schema.parametrize()
def test_schemathesis_no_server_errors_and_schema_conformance(
    case: schemathesis.Case, live_api: LiveApi
) -> None:
    response = case.call_and_validate(base_url=live_api.url)
    assert response.status_code < 500, response.text
    if case.method == "DELETE" and case.path == "/agents/{agent_id}":
        live_api.ensure_agent()
