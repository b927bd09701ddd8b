"""Real ``carrier`` processes for the deployment tests: start, watch their output, stop or kill.

    web = CarrierProcess.start("serve", "--no-clients", "--port", str(port), env=env)
    await web.wait_for("console:")        # a line containing this
    web.stop()                            # SIGTERM, as an orchestrator stops it
    worker.kill()                         # SIGKILL: no clean-up at all

Each process runs :mod:`tests.deploy._carrier` (the real command, with the hashing embedder, a
fake model and, when given, Discord pointed at a loopback fake). Output is read by threads, so
a process never blocks on a full pipe; ``lines`` holds stdout and stderr as they come.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ADMIN_TOKEN", "ROOT", "CarrierProcess", "base_env", "free_port"]

ADMIN_TOKEN = "deploy-test-admin-token-0123456789"
"""The admin token every process of :func:`base_env` serves the API with."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def base_env(data_dir: Path, *, mongodb_uri: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of a test process: no keys or CARRIER_* from outside, a private data
    dir, an admin token, MongoDB when given."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN")) and not k.startswith("CARRIER_")
    }
    env.update(
        {
            "CARRIER_DATA_DIR": str(data_dir),
            "CARRIER_ADMIN_TOKEN": ADMIN_TOKEN,
            "CARRIER_SECRET_KEY": "deploy-test-secret-key-0123456789abcdef",
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            # A dead worker's connections are taken over in ~6 s rather than ~15 s.
            "CARRIER_CONNECTION_LEASE_SECONDS": "6",
        }
    )
    if mongodb_uri is not None:
        env["CARRIER_MONGODB_URI"] = mongodb_uri
    env.update(extra)
    return env


class CarrierProcess:
    def __init__(self, proc: subprocess.Popen[str], name: str) -> None:
        self.proc, self.name = proc, name
        self.lines: list[str] = []
        self._threads = [
            threading.Thread(target=self._read, args=(stream,), daemon=True)
            for stream in (proc.stdout, proc.stderr)
        ]
        for thread in self._threads:
            thread.start()

    @classmethod
    def start(cls, *args: str, env: Mapping[str, str], name: str = "") -> CarrierProcess:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.deploy._carrier", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=dict(env),
        )
        return cls(proc, name or args[0])

    def _read(self, stream: IO[str] | None) -> None:
        if stream is None:
            return
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def has(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    async def wait_for(self, text: str, *, bound_s: float = 120.0) -> None:
        """Until a line contains ``text``; fails (with the output) if the process ends first
        or ``bound_s`` passes — a bound against hanging, not a measure of speed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + bound_s
        while not self.has(text):
            if self.proc.poll() is not None:
                await asyncio.sleep(0.2)  # the last lines
                if self.has(text):
                    return
                raise AssertionError(
                    f"{self.name} exited ({self.proc.returncode}) before saying {text!r}:\n"
                    + self.output[-4000:]
                )
            if loop.time() > deadline:
                raise AssertionError(f"{self.name} never said {text!r}:\n" + self.output[-4000:])
            await asyncio.sleep(0.05)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, then wait; SIGKILL if it does not end."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"{self.name} did not stop on SIGTERM:\n{self.output[-4000:]}"
            ) from None
        finally:
            self._join()

    def kill(self) -> None:
        """SIGKILL: the process ends without any clean-up (its leases simply expire)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._join()

    def _join(self) -> None:
        for thread in self._threads:
            thread.join(timeout=10)
