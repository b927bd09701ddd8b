"""``carrier chat`` as people run it (a subprocess, lines piped in) against a model server
injecting the fault mix: it reads every line, answers it or says in one line on stderr why not,
never shows exception text, and exits 0 unless every message failed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.conftest import exception_text
from tests.faults.fault_server import FaultMix, FaultServer

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT, DEADLINE = 0.5, 2.5
CHARACTER = """\
name: Harbor
bio:
  - Harbor hosts a game-dev community.
messageExamples:
  - - {user: "{{user1}}", content: {text: hello}}
    - {user: Harbor, content: {text: Ahoy!}}
"""

pytestmark = pytest.mark.slow


@pytest.fixture
def server() -> Iterator[FaultServer]:
    server = FaultServer(hang=2.0, retry_after=0.1, seed=160)
    server.start()
    yield server
    server.stop()


def chat(tmp_path: Path, server: FaultServer, lines: list[str]) -> subprocess.CompletedProcess[str]:
    character = tmp_path / "harbor.yaml"
    character.write_text(CHARACTER)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith(("CARRIER_", "OPENAI_"))
    }
    env.update(
        {
            "CARRIER_DATA_DIR": str(tmp_path / "data"),
            "CARRIER_MODEL": "openai/primary",
            "CARRIER_API_BASE": server.base_url,
            "CARRIER_MODEL_TIMEOUT": str(TIMEOUT),
            "CARRIER_TURN_DEADLINE": str(DEADLINE),
            "HF_HUB_OFFLINE": "1",
        }
    )
    return subprocess.run(
        # The hashing embedder: the claim is about model faults, not the sentence model.
        [sys.executable, "-m", "tests._hashed_carrier", "chat", str(character), "--user", "ana"],
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=240,
    )


def test_chat_faults_every_piped_line_is_answered_or_explained(
    tmp_path: Path, server: FaultServer
) -> None:
    server.mixes = {"primary": FaultMix(rate=0.3)}
    lines = [f"message number {n}" for n in range(24)]
    result = chat(tmp_path, server, lines)
    assert result.returncode == 0, result.stderr
    answers = [line for line in result.stdout.splitlines() if line.strip()]
    failures = [
        line for line in result.stderr.splitlines() if line.startswith("carrier: no answer")
    ]
    # Every line was read: each has an answer on stdout or one line on stderr.
    assert len(answers) + len(failures) == len(lines), (result.stdout, result.stderr)
    assert all(a.startswith("Harbor: All good here.") for a in answers)
    assert len(answers) >= len(lines) // 2  # retries answer most of them
    assert server.total() - server.total("ok") > 0  # and faults were injected
    for failure in failures:
        assert failure.startswith(
            (
                "carrier: no answer this time: model call failed",
                "carrier: no answer this time: model deadline",
            )
        ), failure
    assert exception_text(result.stdout + result.stderr) == [], result.stderr


def test_chat_faults_exit_1_when_every_message_failed(tmp_path: Path, server: FaultServer) -> None:
    server.mixes = {"primary": FaultMix.always("500", "no_choices", "bad_json", "cut")}
    result = chat(tmp_path, server, ["hello", "are you there?", "hello?"])
    assert result.returncode == 1
    assert result.stdout.strip() == ""
    failures = [line for line in result.stderr.splitlines() if "no answer" in line]
    assert len(failures) == 3
    assert exception_text(result.stderr) == [], result.stderr
    assert "IndexError" not in result.stderr
