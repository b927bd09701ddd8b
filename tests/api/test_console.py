"""The web console as files: served with a strict CSP, self-contained, labelled, outside OpenAPI.

The page itself is driven in a real browser by ``test_console_browser.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from html.parser import HTMLParser
from importlib import resources

import httpx
import pytest

from carrier.agents import AgentManager
from carrier.api import ApiSettings, create_app
from carrier.api.console import ASSETS, CSP
from carrier.settings import Settings

STATIC = resources.files("carrier.api.console").joinpath("static")


def static_files() -> dict[str, str]:
    return {f.name: f.read_text(encoding="utf-8") for f in STATIC.iterdir() if f.is_file()}


class Page(HTMLParser):
    """Collects what the checks below need from index.html."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.label_for: set[str] = set()
        self.controls: list[str] = []
        self.attrs: list[tuple[str, str, str]] = []
        self.scripts: list[dict[str, str | None]] = []
        self.inline_script = False
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for name, value in attrs:
            self.attrs.append((tag, name, value or ""))
        if found.get("id"):
            self.ids.add(str(found["id"]))
        if tag == "label" and found.get("for"):
            self.label_for.add(str(found["for"]))
        if tag in ("input", "textarea", "select"):
            self.controls.append(str(found.get("id")))
        if tag == "script":
            self.scripts.append(found)
            self._in_script = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline_script = True


@pytest.fixture
def console(
    manager: AgentManager,
    settings: Settings,
    api_settings: ApiSettings,
    make_client: Callable[..., httpx.AsyncClient],
) -> httpx.AsyncClient:
    """A client from a remote address with no token: the page needs none, the API does."""
    app = create_app(manager, settings, api_settings=api_settings)
    return make_client(app, token=None)


async def test_console_page_served_with_strict_csp(console: httpx.AsyncClient) -> None:
    async with console:
        page = await console.get("/console")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert csp == CSP
        for directive in ("default-src 'self'", "script-src 'self'", "object-src 'none'"):
            assert directive in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp and "*" not in csp
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["x-frame-options"] == "DENY"
        assert '<h2 id="agents-heading">Agents</h2>' in page.text
        # The API itself still wants a token from this address.
        assert (await console.get("/agents")).status_code == 401


async def test_console_root_redirects_to_page(console: httpx.AsyncClient) -> None:
    async with console:
        root = await console.get("/")
        assert root.status_code == 307
        assert root.headers["location"] == "/console"


async def test_console_assets_served_with_their_types(console: httpx.AsyncClient) -> None:
    async with console:
        for name, media in ASSETS.items():
            got = await console.get(f"/console/assets/{name}")
            assert got.status_code == 200, name
            assert got.headers["content-type"] == media
            assert got.headers["content-security-policy"] == CSP
            assert got.text == static_files()[name]


@pytest.mark.parametrize("name", ["index.html", "nope.js", "..%2F__init__.py", "%2e%2e"])
async def test_console_unknown_asset_not_found(console: httpx.AsyncClient, name: str) -> None:
    async with console:
        got = await console.get(f"/console/assets/{name}")
        assert got.status_code == 404
        assert got.json()["error"] in ("not_found",)


def test_console_assets_match_package_files() -> None:
    """Every shipped file is served and every served file is shipped (package data globs)."""
    assert set(static_files()) == {*ASSETS, "index.html"}


def test_console_files_fetch_nothing_from_elsewhere() -> None:
    for name, text in static_files().items():
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.I), name
        assert "@import" not in text, name


def test_console_page_has_no_inline_code_and_labels_every_control() -> None:
    html = static_files()["index.html"]
    page = Page()
    page.feed(html)
    assert not page.inline_script
    assert all(str(s.get("src")).startswith("/console/assets/") for s in page.scripts)
    for tag, name, value in page.attrs:
        assert not name.startswith("on"), f"inline handler {name} on <{tag}>"
        assert name != "style", f"inline style on <{tag}>"
        if name in ("src", "href"):
            assert value.startswith(("/console/assets/", "#", "data:")), value
    unlabelled = [c for c in page.controls if c not in page.label_for]
    assert unlabelled == []
    assert page.label_for <= page.ids
    # Every id the scripts look up exists in the page (dynamic ones are made by the scripts).
    scripts = "".join(static_files()[n] for n in ASSETS if n.endswith(".js"))
    looked_up = set(re.findall(r"\$\(\"([a-z-]+)\"\)", scripts))
    looked_up |= set(re.findall(r"#([a-z][a-z-]+)\"\)", scripts))
    assert looked_up - page.ids == set()


async def test_console_not_in_openapi(console: httpx.AsyncClient) -> None:
    async with console:
        paths = (await console.get("/openapi.json")).json()["paths"]
        assert not any(p == "/" or p.startswith("/console") for p in paths)
