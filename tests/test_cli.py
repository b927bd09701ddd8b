"""The `carrier` command, run as users run it: in a subprocess, with its own data dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from carrier.character import load_character, write_card_png

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "elizaos-characters"


def carrier(
    *args: str,
    data_dir: Path,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    hashing: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``carrier ARGS`` in a subprocess; ``hashing``: with the hashing embedder
    (:mod:`tests._hashed_carrier`), where the claim is not about the embedding model."""
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("CARRIER_")
    }
    full_env.update({"CARRIER_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1", **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "tests._hashed_carrier" if hashing else "carrier", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=full_env,
        timeout=240,
    )


def test_cli_help_does_not_import_torch_or_litellm() -> None:
    code = (
        "import sys\n"
        "sys.argv = ['carrier', '--help']\n"
        "from carrier.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
        "heavy = [m for m in ('torch', 'litellm', 'sentence_transformers', 'transformers', 'discord',"
        " 'numpy', 'pydantic', 'asyncio', 'carrier.memory', 'carrier.character', 'rich.console',"
        " 'clients.discord') if m in sys.modules]\n"
        "print('HEAVY:' + ','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "chat" in out.stdout and "validate" in out.stdout and "discord" in out.stdout
    assert out.stdout.strip().endswith("HEAVY:")


def test_cli_help_lists_each_command_with_its_own_first_line() -> None:
    # `carrier --help` reads COMMANDS without importing the commands: the table must not drift.
    from carrier.cli import COMMANDS
    from carrier.cli._lazy import load_command

    for name, entry in COMMANDS.items():
        command = load_command(name, entry.target)
        assert command.name == name
        first = (command.help or "").strip().splitlines()[0]
        assert first == entry.help, name


def test_cli_runs_a_lazily_loaded_command_and_an_adapter_group(tmp_path: Path) -> None:
    for args in (["memory", "--help"], ["discord", "--help"], ["validate", "characters"]):
        result = carrier(*args, data_dir=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
    unknown = carrier("nosuch", data_dir=tmp_path)
    assert unknown.returncode == 2 and "No such command 'nosuch'" in unknown.stderr


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="../shared/fixtures is not beside the repository")
def test_cli_validate_every_elizaos_fixture(tmp_path: Path) -> None:
    result = carrier("validate", str(FIXTURES), "characters", data_dir=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("ok   ") == len(list(FIXTURES.rglob("*.json"))) + 3


def test_cli_validate_reports_all_three_mistakes(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: Broken\n"
        "bio: 42\n"
        "messageExamples:\n"
        "  - - user: '{{user1}}'\n"
        "    - user: Broken\n"
        "      content: {text: hi}\n"
        "settings:\n"
        "  secrets:\n"
        "    OPENAI_API_KEY: sk-live-abcdef123456\n"
    )
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"name": "Fine", "bio": "ok"}))
    result = carrier("validate", str(bad), str(good), data_dir=tmp_path)
    assert result.returncode == 1
    out = result.stdout
    assert f"FAIL {bad}: 3 problem(s)" in out
    assert "bio: expected a string or a list of strings, got 42" in out
    assert "messageExamples.0.0.content: required field is missing" in out
    assert "settings.secrets.OPENAI_API_KEY: a literal secret is not allowed" in out
    assert "sk-live-abcdef123456" not in out + result.stderr
    assert f"ok   {good}" in out


def test_cli_validate_checks_client_options_against_the_installed_clients(tmp_path: Path) -> None:
    bad = tmp_path / "keeper.yaml"
    bad.write_text(
        "name: Keeper\n"
        "bio: [Keeper tends the lamp.]\n"
        "clients: [discord, instagram]\n"
        "clientConfig:\n"
        "  discord: {maxMessageLength: 50, allowedChannels: ['lamp-room']}\n"
        "  instagram: {publisher: carrier-pigeon}\n"
        "  telegram: {anything: goes}\n"  # not installed: a warning elsewhere, no problem here
    )
    result = carrier("validate", str(bad), data_dir=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"FAIL {bad}: 2 problem(s)" in result.stdout
    assert "clientConfig.discord.maxMessageLength: Input should be greater than" in result.stdout
    assert "clientConfig.instagram.publisher:" in result.stdout


def test_cli_validate_warns_and_strict_makes_warnings_errors(tmp_path: Path) -> None:
    warned = tmp_path / "warned.yaml"
    warned.write_text(
        "name: Loud\n"
        "clients: [twitter]\n"
        "modelProvider: nosuch\n"
        "knowledge:\n"
        "  - path: docs/missing.md\n"
        "plugins: ['@elizaos/plugin-sql']\n"
        "settings:\n"
        "  model: gpt-4o  # cheap\n"
        "  voice: {model: en_US}\n"
        "bio:\n"
        "  - Hang out in #jam-chat with us\n"
    )
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"name": "Fine", "bio": "ok", "clients": ["discord"]}))

    result = carrier("validate", str(warned), str(good), data_dir=tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert f"ok   {warned}: 6 warning(s)" in out
    assert (
        "  warn clients.0: 'twitter' is not a client Carrier has (it has: discord, instagram); "
        "it will be ignored"
    ) in out
    assert "  warn modelProvider: 'nosuch' is not a model provider Carrier knows" in out
    assert "  warn knowledge.0.path: 'docs/missing.md' not found" in out
    assert "  warn plugins: Carrier does not load ElizaOS plugins" in out
    assert "  warn settings.voice: " in out
    assert "  warn bio.0: line 11: YAML reads '#jam-chat with us' as a comment" in out
    assert "warn settings.model" not in out
    assert f"ok   {good}\n" in out
    assert out.strip().endswith("2 ok, 0 with problems, 6 warning(s)")

    strict = carrier("validate", "--strict", str(warned), str(good), data_dir=tmp_path)

    assert strict.returncode == 1
    assert f"FAIL {warned}: 6 warning(s)" in strict.stdout
    assert f"ok   {good}\n" in strict.stdout
    assert "1 ok, 1 with problems, 6 warning(s) (--strict" in strict.stdout


def test_cli_validate_strict_passes_on_the_shipped_characters(tmp_path: Path) -> None:
    result = carrier("validate", "--strict", "characters", data_dir=tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 with problems, 0 warning(s)" in result.stdout
    assert "  warn " not in result.stdout


def test_cli_import_card_png_round_trip(tmp_path: Path) -> None:
    card = {
        "spec": "chara_card_v3",
        "spec_version": "3.0",
        "data": {
            "name": "Captain Vale",
            "description": "A retired airship captain. Tells long stories.",
            "personality": "gruff, kind",
            "scenario": "A tavern at the edge of the sky.",
            "first_mes": "Pull up a chair, traveller.",
            "mes_example": "<START>\n{{user}}: Who are you?\n{{char}}: Vale. I flew the Northern Reach for thirty years.",
            "tags": ["airships", "stories"],
        },
    }
    png = write_card_png(card, tmp_path / "vale.png", version=3)
    out = tmp_path / "vale.yaml"
    result = carrier("import-card", str(png), "-o", str(out), data_dir=tmp_path)
    assert result.returncode == 0, result.stderr
    character = load_character(out)
    assert character.name == "Captain Vale"
    assert "airships" in character.topics
    again = carrier("import-card", str(png), "-o", str(out), data_dir=tmp_path)
    assert again.returncode == 1 and "--force" in again.stderr


@pytest.mark.slow
def test_cli_chat_offline_answers_and_remembers(tmp_path: Path) -> None:
    first = carrier(
        "chat", "characters/harbor.yaml", data_dir=tmp_path, stdin="hello\nwho are you?\n"
    )
    assert first.returncode == 0, first.stderr
    lines = [line for line in first.stdout.splitlines() if line.strip()]
    assert len(lines) == 2 and all(line.startswith("Harbor: ") for line in lines)
    assert "Harbor" in lines[1]  # the intro example answers "who are you?"
    assert "offline" in first.stderr and "CARRIER_MODEL" in first.stderr

    second = carrier("chat", "characters/harbor.yaml", data_dir=tmp_path, stdin="who are you?\n")
    assert second.returncode == 0, second.stderr
    assert 'You asked me this before ("who are you?"' in second.stdout
    assert (tmp_path / "carrier.db").exists()


def test_cli_chat_bad_character_file_exits_with_problems(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"name": "", "bio": []}')
    result = carrier("chat", str(bad), data_dir=tmp_path, stdin="hi\n")
    assert result.returncode == 2
    assert str(bad) in result.stderr and "name" in result.stderr


@pytest.mark.slow
def test_cli_chat_uses_litellm_with_a_local_endpoint(tmp_path: Path) -> None:
    from tests.llm.openai_server import FakeOpenAIServer, Reply

    server = FakeOpenAIServer(
        default=Reply(
            text="<response><thought>t</thought><actions>REPLY</actions><text>Ahoy from the model!</text></response>"
        )
    )
    server.start()
    try:
        result = carrier(
            "chat",
            "characters/harbor.yaml",
            data_dir=tmp_path,
            stdin="hello\n",
            env={"CARRIER_MODEL": "openai/local-test", "CARRIER_API_BASE": server.base_url},
            hashing=True,
        )
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Harbor: Ahoy from the model!"
    assert "using openai/local-test" in result.stderr
    bodies = [r.body for r in server.requests]
    assert bodies and bodies[0]["model"] == "local-test"
    assert "You are Harbor" in json.dumps(bodies[0]["messages"])


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_cli_run_serves_api_and_stops_on_sigterm(tmp_path: Path) -> None:
    import signal
    import time

    import httpx

    port = _free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("CARRIER_")
    }
    env.update({"CARRIER_DATA_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "carrier", "run", "characters/harbor.yaml", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the API did not come up"
            time.sleep(0.3)
        # No CARRIER_ADMIN_TOKEN: the local token minted into the data dir is the admin's.
        admin = {"Authorization": f"Bearer {(tmp_path / 'admin.token').read_text().strip()}"}
        agents = httpx.get(f"{base}/agents", headers=admin, timeout=10).json()
        harbor = next(a for a in agents if a["name"] == "Harbor")
        reply = httpx.post(
            f"{base}/{harbor['id']}/message",
            json={"text": "who are you?"},
            headers=admin,
            timeout=60,
        )
        assert reply.status_code == 200, reply.text
        assert "Harbor" in reply.json()["reply"]
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "Harbor (" in out and "skipped discord: DISCORD_API_TOKEN" in out
    assert "agent API and console on http://127.0.0.1:" in out
    assert "#token=" not in out  # stdout is a pipe: the token stays in its file
    assert "stopping" in out


def test_cli_serve_no_clients_reaches_the_agent_manager(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The Procfile's web process: `carrier serve --no-clients` beside `carrier run --no-api`.
    from typer.testing import CliRunner

    import carrier.run
    from carrier.cli import app

    seen: list[bool] = []

    async def fake_serve_main(
        settings: object, *, host: str, port: int, start_clients: bool
    ) -> int:
        seen.append(start_clients)
        return 0

    monkeypatch.setattr(carrier.run, "serve_main", fake_serve_main)
    monkeypatch.setenv("CARRIER_DATA_DIR", str(tmp_path))
    runner = CliRunner()
    assert runner.invoke(app, ["serve", "--no-clients"]).exit_code == 0
    assert runner.invoke(app, ["serve"]).exit_code == 0
    assert seen == [False, True]
    assert (ROOT / "Procfile").read_text().splitlines() == [
        "web: carrier serve --no-clients --host 0.0.0.0 --port ${PORT:-8000}",
        "worker: carrier run --no-api",
    ]


def test_cli_an_invalid_setting_is_one_line_for_every_command(tmp_path: Path) -> None:
    for args in (["chat", "characters/harbor.yaml"], ["memory", "list", "-a", "Harbor"]):
        result = carrier(*args, data_dir=tmp_path, env={"CARRIER_RECALL_K": "many"})
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip().splitlines() == [
            "carrier: invalid settings: CARRIER_RECALL_K: Input should be a valid integer, "
            "unable to parse string as an integer"
        ]
