"""`carrier health`, run as a container healthcheck runs it: a subprocess whose exit code is the
verdict. The API side asks a loopback HTTP server started here (answering 200 or 503 as told);
the worker side reads leases written into a real SQLite fleet store."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from carrier.jobs.clock import ManualClock
from carrier.types import utcnow
from tests.mongo_servers import MongoServer

ROOT = Path(__file__).resolve().parents[1]
HOST = socket.gethostname()


def carrier_health(
    *args: str, data_dir: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CARRIER_") and k not in ("PORT", "HTTP_PROXY", "http_proxy")
    }
    full_env.update({"CARRIER_DATA_DIR": str(data_dir), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "carrier", "health", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=full_env,
        timeout=120,
    )


class HealthServer:
    """A loopback server answering each path with a set status and JSON body; records paths."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, dict[str, str], dict[str, str]]] = {}
        self.asked: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.asked.append(self.path)
                code, body, headers = server.answers.get(self.path, (404, {"error": "nf"}, {}))
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def answer(self, path: str, code: int, status: str, **headers: str) -> None:
        self.answers[path] = (code, {"status": status}, headers)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


@pytest.fixture
def server() -> Iterator[HealthServer]:
    httpd = HealthServer()
    try:
        yield httpd
    finally:
        httpd.close()


# -- the API -----------------------------------------------------------------------------------
def test_health_ready_answered_200_exits_0(server: HealthServer, tmp_path: Path) -> None:
    server.answer("/health/ready", 200, "ok")
    result = carrier_health("--url", server.url, data_dir=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert server.asked == ["/health/ready"]
    assert result.stdout.strip() == f"ok: {server.url}/health/ready answered 200 (status: ok)"


def test_health_not_ready_exits_1_and_live_asks_liveness(
    server: HealthServer, tmp_path: Path
) -> None:
    server.answer("/health/ready", 503, "degraded")
    server.answer("/health/live", 200, "ok")
    ready = carrier_health("--url", server.url, data_dir=tmp_path)
    assert ready.returncode == 1
    assert ready.stdout.strip() == (
        f"unhealthy: {server.url}/health/ready answered 503 (status: degraded)"
    )
    live = carrier_health("--url", server.url + "/", "--live", data_dir=tmp_path)
    assert live.returncode == 0, live.stdout + live.stderr
    assert server.asked == ["/health/ready", "/health/live"]


def test_health_asks_loopback_on_port_from_the_environment(
    server: HealthServer, tmp_path: Path
) -> None:
    server.answer("/health/ready", 200, "ok")
    result = carrier_health(data_dir=tmp_path, env={"PORT": str(server.port)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert server.asked == ["/health/ready"]


def test_health_full_url_is_asked_as_given_and_credentials_never_shown(
    server: HealthServer, tmp_path: Path
) -> None:
    server.answer("/custom/ready?x=secretquery", 200, "ok")
    url = f"http://probe:hunter2@127.0.0.1:{server.port}/custom/ready?x=secretquery"
    result = carrier_health("--url", url, data_dir=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert server.asked == ["/custom/ready?x=secretquery"]
    out = result.stdout + result.stderr
    assert "hunter2" not in out and "secretquery" not in out


def test_health_does_not_follow_a_redirect(server: HealthServer, tmp_path: Path) -> None:
    server.answer("/health/ready", 302, "moved", Location="/elsewhere")
    server.answer("/elsewhere", 200, "ok")
    result = carrier_health("--url", server.url, data_dir=tmp_path)
    assert result.returncode == 1
    assert "answered 302" in result.stdout
    assert server.asked == ["/health/ready"]


def test_health_connection_refused_exits_1_with_a_clear_line(tmp_path: Path) -> None:
    with socket.socket() as bound:  # bound, never listening: a connection is refused
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        result = carrier_health("--url", f"http://127.0.0.1:{port}", data_dir=tmp_path)
    assert result.returncode == 1
    assert result.stdout.strip().startswith(f"down: nothing listens at 127.0.0.1:{port}")
    assert "connection refused" in result.stdout


def test_health_a_server_that_never_answers_times_out(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts into its backlog, never reads nor answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        result = carrier_health(
            "--url", f"http://127.0.0.1:{port}", "--timeout", "0.5", data_dir=tmp_path
        )
    assert result.returncode == 1
    assert result.stdout.strip() == (
        f"down: http://127.0.0.1:{port}/health/ready did not answer within 0.5 s"
    )


def test_health_usage_mistakes_are_refused(tmp_path: Path) -> None:
    both = carrier_health("--url", "http://127.0.0.1:1/health/ready", "--live", data_dir=tmp_path)
    assert both.returncode == 2 and "names a path already" in both.stderr
    scheme = carrier_health("--url", "127.0.0.1:8000", data_dir=tmp_path)
    assert scheme.returncode == 2 and "http://" in scheme.stderr
    port = carrier_health(data_dir=tmp_path, env={"PORT": "web"})
    assert port.returncode == 2 and "fix PORT" in port.stderr
    mixed = carrier_health("--worker", "--live", data_dir=tmp_path)
    assert mixed.returncode == 2 and "--worker" in mixed.stderr


def test_health_probe_imports_nothing_heavy(server: HealthServer) -> None:
    # It runs every few seconds in every container: the standard library and typer only (typer
    # brings pydantic along when it builds a command; the probe itself needs neither).
    server.answer("/health/ready", 200, "ok")
    code = (
        "import sys\n"
        f"sys.argv = ['carrier', 'health', '--url', {server.url!r}]\n"
        "from carrier.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "heavy = [m for m in ('torch', 'numpy', 'asyncio', 'carrier.settings', 'carrier.fleet',"
        " 'carrier.memory', 'pymongo', 'sqlite3') if m in sys.modules]\n"
        "print('HEAVY:' + ','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().endswith("HEAVY:")


# -- a worker ----------------------------------------------------------------------------------
async def _hold(data_dir: Path, name: str, *, ttl_s: float, at: ManualClock | None = None) -> None:
    """Write the lease ``name`` into the data dir's fleet store (made if need be), as a worker
    does."""
    from carrier.fleet.sqlite import SQLiteFleetStore

    clock = at or ManualClock(utcnow())
    async with SQLiteFleetStore(path=data_dir / "carrier.db", clock=clock) as fleet:
        assert await fleet.acquire(name, owner=name.removeprefix("worker:"), ttl_s=ttl_s)


def test_health_worker_without_a_store_exits_1_and_creates_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    result = carrier_health("--worker", data_dir=data_dir)
    assert result.returncode == 1
    assert result.stdout.strip() == (
        f"no worker: {data_dir / 'carrier.db'} does not exist (no worker has started)"
    )
    assert not (data_dir / "carrier.db").exists()


async def test_health_worker_passes_on_a_live_lease_of_this_host(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    await _hold(data_dir, "worker:elsewhere-12", ttl_s=3600)
    await _hold(data_dir, f"worker:{HOST}-extra-7", ttl_s=3600)  # another host, "<HOST>-extra"
    none = carrier_health("--worker", data_dir=data_dir)
    assert none.returncode == 1, none.stdout + none.stderr
    assert none.stdout.strip().startswith(f"no worker: no lease worker:{HOST}-<pid> in SQLite ")

    await _hold(data_dir, f"worker:{HOST}-4242", ttl_s=3600)
    alive = carrier_health("--worker", data_dir=data_dir)
    assert alive.returncode == 0, alive.stdout + alive.stderr
    assert alive.stdout.startswith(f"ok: worker:{HOST}-4242 renewed ")


async def test_health_worker_fails_on_an_expired_lease(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    an_hour_ago = ManualClock(utcnow() - timedelta(hours=1))
    await _hold(data_dir, f"worker:{HOST}-99", ttl_s=60, at=an_hour_ago)  # expired 59 min ago
    result = carrier_health("--worker", data_dir=data_dir)
    assert result.returncode == 1
    assert result.stdout.startswith(f"unhealthy: worker:{HOST}-99 expired ")
    assert "the worker stopped or hangs" in result.stdout


async def test_health_worker_id_names_exactly_one_worker(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    await _hold(data_dir, "worker:w-7", ttl_s=3600)
    await _hold(data_dir, "worker:w-70", ttl_s=3600)
    seven = carrier_health("--worker", data_dir=data_dir, env={"CARRIER_WORKER_ID": "w-7"})
    assert seven.returncode == 0, seven.stdout + seven.stderr
    assert seven.stdout.startswith("ok: worker:w-7 renewed ")
    eight = carrier_health("--worker", data_dir=data_dir, env={"CARRIER_WORKER_ID": "w-8"})
    assert eight.returncode == 1
    assert "no lease worker:w-8 in SQLite" in eight.stdout


async def test_health_worker_reads_the_mongodb_fleet_store(
    tmp_path: Path, mongo_compatible_server: MongoServer
) -> None:
    from carrier.fleet.mongo import MongoFleetStore

    with mongo_compatible_server.fresh_database() as database:
        uri = mongo_compatible_server.database_uri(database)
        env = {"CARRIER_MONGODB_URI": uri}
        none = carrier_health("--worker", data_dir=tmp_path / "data", env=env)
        assert none.returncode == 1, none.stdout + none.stderr
        assert "in the MongoDB store (CARRIER_MONGODB_URI)" in none.stdout

        async with MongoFleetStore.from_url(uri) as fleet:
            assert await fleet.acquire(f"worker:{HOST}-31", owner=f"{HOST}-31", ttl_s=3600)
        alive = carrier_health("--worker", data_dir=tmp_path / "data", env=env)
        assert alive.returncode == 0, alive.stdout + alive.stderr
        assert alive.stdout.startswith(f"ok: worker:{HOST}-31 renewed ")


def test_health_worker_with_a_store_that_does_not_answer_exits_1(tmp_path: Path) -> None:
    with socket.socket() as bound:  # nothing listens: the store cannot be reached
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        env = {"CARRIER_MONGODB_URI": f"mongodb://127.0.0.1:{port}/carrier"}
        result = carrier_health("--worker", "--timeout", "1", data_dir=tmp_path, env=env)
    assert result.returncode == 1
    assert result.stdout.strip() == "unhealthy: the store did not answer within 1 s"
