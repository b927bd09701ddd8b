"""Start-up as a new user meets it, in real ``carrier`` subprocesses: a taken port stops ``run``
and ``serve`` in one line before anything loads; slow steps show a sign of life; each agent is
reported once and the offline explanation once per run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from carrier.assemble import OFFLINE_HINT, offline_summary
from tests.processes import run_until_ready

ROOT = Path(__file__).resolve().parents[1]


def carrier(
    *args: str, data_dir: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("CARRIER_")
    }
    env.update({"CARRIER_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"})
    return subprocess.run(
        [sys.executable, "-m", "carrier", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=240,
    )


def carrier_until(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run ``carrier`` until it says it runs (a worker runs until stopped), then stop it."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("CARRIER_")
    }
    env.update({"CARRIER_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"})
    return run_until_ready([sys.executable, "-m", "carrier", *args], env=env, cwd=ROOT)


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another server listens on for the whole test."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield int(held.getsockname()[1])


def persona(folder: Path, name: str) -> Path:
    """A persona with no model and no clients: it runs offline, from its one example."""
    path = folder / f"{name.lower()}.json"
    path.write_text(
        json.dumps(
            {
                "name": name,
                "bio": [f"{name} keeps the harbour log."],
                "clients": [],
                "messageExamples": [
                    [
                        {"user": "{{user1}}", "content": {"text": "hello"}},
                        {"user": name, "content": {"text": f"Hello, {name} here."}},
                    ]
                ],
            }
        )
    )
    return path


@pytest.mark.parametrize("command", [["run"], ["serve"]])
def test_startup_taken_port_stops_in_one_line_before_anything_loads(
    command: list[str], taken_port: int, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    result = carrier(*command, "--port", str(taken_port), data_dir=data)

    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"carrier: port {taken_port} on 127.0.0.1 is in use (another carrier, or another "
        f"server); stop it or try --port {taken_port + 1}"
    ]
    # Nothing loaded: no model, no store, not even the generated secret key.
    assert "loading" not in result.stderr and "Traceback" not in result.stderr
    assert not data.exists() or list(data.iterdir()) == []


def test_startup_run_without_api_ignores_the_port_and_loads_no_model_for_nothing(
    taken_port: int, tmp_path: Path
) -> None:
    # --no-api serves nothing, so the port is none of its business; and when no file loads,
    # the embedding model is not loaded just to say so.
    missing = tmp_path / "nosuch.json"
    result = carrier("run", "--no-api", "--port", str(taken_port), str(missing), data_dir=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "is in use" not in result.stderr
    assert result.stdout.startswith(f"skipped {missing}: ")
    assert "no persona could be loaded" in result.stdout
    assert "loading" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_startup_each_agent_once_and_the_offline_explanation_once(tmp_path: Path) -> None:
    ada, bo = persona(tmp_path, "Ada"), persona(tmp_path, "Bo")
    result = carrier_until("run", "--no-api", str(ada), str(bo), data_dir=tmp_path / "data")
    assert result.returncode == 0, result.stdout + result.stderr
    everything = (result.stdout + result.stderr).splitlines()

    for name in ("Ada", "Bo"):
        assert len([line for line in everything if line.startswith(f"{name} (")]) == 1
        assert len([line for line in everything if f"{name} (" in line]) == 1  # not in a log too
        assert f"starting {name}..." in everything
    offline = [line for line in everything if "CARRIER_MODEL" in line]
    assert offline == [
        f"offline: Ada, Bo: no model is configured. They answer from their characters' "
        f"message examples. {OFFLINE_HINT}"
    ]
    assert "loading the embedding model..." in result.stderr  # a sign of life while it loads
    # The agent lines carry the model's name only.
    assert [line for line in result.stdout.splitlines() if line.startswith(("Ada (", "Bo ("))] == [
        line for line in result.stdout.splitlines() if line.endswith("): offline")
    ]
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_startup_chat_shows_progress_and_explains_offline_once(tmp_path: Path) -> None:
    ada = persona(tmp_path, "Ada")
    result = carrier("chat", str(ada), data_dir=tmp_path / "data", stdin="hello\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Ada: Hello, Ada here."
    assert "loading the embedding model..." in result.stderr
    assert result.stderr.count(OFFLINE_HINT) == 1
    assert "carrier: offline: Ada: no model is configured." in result.stderr


def test_startup_offline_summary_names_each_reason_once() -> None:
    summary = offline_summary(
        [
            ("Harbor", "asks for openai/gpt-4o-mini, but OPENAI_API_KEY is not set"),
            ("Lumen", "no model is configured"),
            ("Sage", "no model is configured"),
        ]
    )
    assert summary == (
        "offline: Harbor: asks for openai/gpt-4o-mini, but OPENAI_API_KEY is not set; "
        "Lumen, Sage: no model is configured. They answer from their characters' message "
        f"examples. {OFFLINE_HINT}"
    )
    assert offline_summary([]) is None
    one = offline_summary([("Ada", None)])
    assert one is not None and one.startswith("offline: Ada: no language model. It answers")
