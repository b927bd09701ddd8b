"""The doctor's world: persona files in a temporary folder, its own data dir, the loopback model
server, and `carrier doctor` run in process or as users run it (a subprocess)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from carrier.doctor import Report, run_doctor
from tests.llm.openai_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]


def write_persona(folder: Path, name: str, **fields: Any) -> Path:
    """A character file ``<name>.json`` with a little bio and the given fields."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name.lower()}.json"
    data = {"name": name, "bio": [f"{name} is a test persona."], **fields}
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@dataclass
class World:
    tmp: Path
    env: dict[str, str]
    """The environment the doctor reads (and a subprocess gets, beside PATH and the like)."""

    @property
    def data_dir(self) -> Path:
        return Path(self.env["CARRIER_DATA_DIR"])

    def persona(self, name: str, **fields: Any) -> Path:
        return write_persona(self.tmp / "characters", name, **fields)

    async def doctor(self, *paths: Path, **options: Any) -> Report:
        options.setdefault("port", free_port())
        options.setdefault("wait", 60.0)  # generous: a loaded machine must not fail a check
        return await run_doctor(environ=self.env, paths=list(paths), **options)

    async def carrier_doctor(self, *args: str) -> tuple[int, str, str]:
        """``carrier doctor ARGS`` in a subprocess (the event loop keeps serving loopback fakes
        that live in this process meanwhile): exit code, stdout, stderr."""
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.endswith("_API_KEY") and not k.startswith("CARRIER_")
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "carrier", "doctor", *args,
            cwd=self.tmp,
            env={**base, **self.env, "PYTHONPATH": str(ROOT)},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), timeout=240)
        assert proc.returncode is not None
        return proc.returncode, out.decode(), err.decode()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def world(tmp_path: Path) -> World:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    data_dir.chmod(0o700)
    return World(
        tmp=tmp_path,
        env={
            "CARRIER_DATA_DIR": str(data_dir),
            "CARRIER_CHARACTERS_DIR": str(tmp_path / "characters"),
            "CARRIER_SECRET_KEY": "a-secret-key-for-doctor-tests",
        },
    )


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def model_env(openai_server: FakeOpenAIServer) -> dict[str, str]:
    """CARRIER_MODEL served by the loopback model server."""
    return {"CARRIER_MODEL": "openai/doctor-test", "CARRIER_API_BASE": openai_server.base_url}
