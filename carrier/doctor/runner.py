"""``carrier doctor``'s checks in order, gathered into one :class:`Report`.

The deployment first (settings, data dir, secret key, store, API port), then each persona
``carrier run`` would load (its model, then each client it lists), personas side by side.
Personas are the character files (the arguments, or every file in ``characters/``) and, when no
file is named, the agents stored in the store that are not among them: those run only when
started through the API, so their failures are warnings. Every message is scrubbed of the
secrets the checks could see before it is reported.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from carrier.doctor.base import STATUSES, ClientCheck, Result, Status, fail, ok, skip, warn
from carrier.doctor.clients import ClientChecks
from carrier.doctor.datadir import (
    SECRET_KEY_ENV,
    check_data_dir,
    check_secret_key,
    stored_secret_key,
)
from carrier.doctor.model import ModelChecker
from carrier.doctor.port import check_port
from carrier.doctor.store import StoreCheck, check_store
from carrier.memory.base import Store
from carrier.settings import Settings, load_settings

__all__ = ["Report", "run_doctor"]

_SECRET_NAME = re.compile(r"(^|_)(TOKEN|KEY|SECRET|PASSWORD|PASSWD|PASS|SEED)(_|$)", re.IGNORECASE)
"""Variables whose values never appear in a message (``DISCORD_API_TOKEN``, ``OPENAI_API_KEY``)."""


@dataclass
class Report:
    results: list[Result] = field(default_factory=list)

    @property
    def counts(self) -> dict[Status, int]:
        return {s: sum(1 for r in self.results if r.status == s) for s in STATUSES}

    @property
    def failed(self) -> bool:
        return any(r.status == "fail" for r in self.results)

    @property
    def exit_code(self) -> int:
        """1 when anything a configured persona needs fails, else 0 (warnings included)."""
        return 1 if self.failed else 0


@dataclass
class _Persona:
    name: str
    character: Any
    source: str
    needed: bool


async def run_doctor(
    *,
    environ: Mapping[str, str],
    paths: Sequence[Path] = (),
    host: str = "127.0.0.1",
    port: int = 8000,
    serve_api: bool = True,
    stored: bool = True,
    wait: float = 10.0,
    client_checks: Mapping[str, ClientCheck] | None = None,
) -> Report:
    """Check everything ``carrier run [paths] --host host --port port`` needs, reading the
    settings from ``environ``. ``wait``: seconds any one network call may take.
    ``client_checks`` replaces the ``carrier.doctor`` entry points."""
    try:
        settings = load_settings(environ)
    except ValidationError as exc:
        bad = ", ".join(f"CARRIER_{'_'.join(map(str, e['loc'])).upper()}" for e in exc.errors())
        return Report(
            [fail("settings", f"invalid: {bad}", f"fix {bad} in the environment or .env")]
        )
    data_dir = check_data_dir(settings.data_dir)
    results = [data_dir]
    usable = data_dir.status != "fail"
    results.append(
        check_secret_key(settings.data_dir, environ)
        if usable
        else skip("secret key", "the data dir is not usable")
    )
    env = dict(environ)
    # The key carrier run would use; when there is none yet it would generate one, so a session
    # saved under a lost key reads as unreadable here too.
    env[SECRET_KEY_ENV] = (
        environ.get(SECRET_KEY_ENV)
        or stored_secret_key(settings.data_dir)
        or secrets.token_urlsafe(48)
    )
    if usable or settings.mongodb_uri is not None:
        store = await check_store(settings, wait=wait)
    else:
        store = StoreCheck(skip("store", "the data dir is not usable"))
    try:
        results.append(store.result)
        results.append(
            check_port(host, port, settings)
            if serve_api
            else skip("API port", "--no-api: the API is not served")
        )
        personas, loaded = await _personas(paths, settings, store.store, stored=stored)
        results.extend(loaded)
        models = ModelChecker(settings, env, timeout=wait)
        clients = ClientChecks(
            settings=settings, environ=env, store=store.store, timeout=wait, checks=client_checks
        )

        async def check(persona: _Persona) -> list[Result]:
            found = [ok("persona", persona.source)]
            found += await models.check(persona.character)
            found += await clients.check(persona.character)
            return [_of(persona, r) for r in found]

        for found in await asyncio.gather(*(check(p) for p in personas)):
            results.extend(found)
    finally:
        await store.aclose()
    hidden = _secrets(env, [p.character for p in personas], store.secrets)
    return Report([_scrub(r, hidden) for r in results])


async def _personas(
    paths: Sequence[Path], settings: Settings, store: Store | None, *, stored: bool
) -> tuple[list[_Persona], list[Result]]:
    from carrier.character import CHARACTER_SUFFIXES, load_character, parse_character
    from carrier.errors import CharacterError

    files = list(paths)
    folder = settings.characters_dir
    if not files and folder.is_dir():
        files = sorted(p for p in folder.glob("*") if p.suffix.lower() in CHARACTER_SUFFIXES)
    personas: list[_Persona] = []
    results: list[Result] = []
    for path in files:
        try:
            character = load_character(path)
        except CharacterError as exc:
            results.append(
                replace(
                    fail(
                        "persona",
                        f"{path} does not load ({len(exc.problems)} problem(s))",
                        f"carrier validate {path} shows every problem",
                    ),
                    persona=str(path),
                )
            )
            continue
        personas.append(_Persona(character.name, character, f"from {path}", needed=True))
    if stored and not paths and store is not None:
        known = {p.character.agent_id for p in personas}
        for record in await store.list_agents():
            if record.id in known:
                continue
            try:
                character = parse_character(record.character)
            except CharacterError as exc:
                results.append(
                    replace(
                        warn(
                            "persona",
                            f"stored agent {record.id} does not load ({exc.problems[0]})",
                            "fix or delete it through the API (PUT or DELETE /agents/{id})",
                        ),
                        persona=record.name,
                    )
                )
                continue
            source = (
                f"stored agent {record.id}, not in the character files: it runs when started "
                "through the API, so its problems are warnings"
            )
            personas.append(_Persona(character.name, character, source, needed=False))
    if not personas and not results:
        where = f"{folder}/" if not paths else ", ".join(map(str, paths))
        results.append(
            fail(
                "personas",
                f"no character files in {where}",
                "name one (carrier doctor characters/NAME.yaml) or set CARRIER_CHARACTERS_DIR",
            )
        )
    return personas, results


def _of(persona: _Persona, result: Result) -> Result:
    status = "warn" if result.status == "fail" and not persona.needed else result.status
    return replace(result, persona=persona.name, status=status)


def _secrets(env: Mapping[str, str], characters: Sequence[Any], extra: Sequence[str]) -> list[str]:
    """Every value a message must not show: secret-looking variables, the characters' secrets."""
    found = {v for k, v in env.items() if _SECRET_NAME.search(k)}
    for character in characters:
        for name in character.secret_refs():
            value = character.resolve_secret(name, env)
            if value:
                found.add(str(value))
    found.update(extra)
    # Longest first, so a secret containing another is hidden whole; short values are too common.
    return sorted((v for v in found if len(v) >= 6), key=len, reverse=True)


def _scrub(result: Result, hidden: Sequence[str]) -> Result:
    detail, fix = result.detail, result.fix
    for value in hidden:
        detail, fix = detail.replace(value, "***"), fix.replace(value, "***")
    return replace(result, detail=detail, fix=fix)
