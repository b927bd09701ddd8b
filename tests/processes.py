"""Running a long-lived ``carrier`` command in a test until it says it runs, then stopping it as
Ctrl-C does."""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["run_until_ready"]

READY = "running (Ctrl-C to stop)"


def run_until_ready(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    ready: str = READY,
    bound_s: float = 240,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` until a line of its stdout is ``ready``, send SIGINT, and return what it
    printed (a worker runs until stopped; the bound is against hanging, not a measure)."""
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=dict(env),
    )
    err: list[str] = []
    drain = threading.Thread(target=lambda: err.extend(proc.stderr or []), daemon=True)
    drain.start()
    out: list[str] = []
    timer = threading.Timer(bound_s, proc.kill)
    timer.start()
    try:
        for line in proc.stdout or []:
            out.append(line)
            if line.strip() == ready:
                proc.send_signal(signal.SIGINT)
        proc.wait(timeout=bound_s)
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    drain.join(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(out), "".join(err))
