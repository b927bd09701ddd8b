"""What the API benchmarks share: a free loopback port, a server child to wait for, an agent to
create, and what a Linux process has spent (``/proc``), read from outside it.

``bench/api.py`` serves a runtime of its own making; ``bench/throughput.py`` and
``bench/first_answer.py`` run the real ``carrier serve`` / ``carrier run`` commands. Both talk to
the server the same way, through these helpers.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ADMIN = "bench-admin-token-of-24-characters"
AUTH = {"Authorization": f"Bearer {ADMIN}"}
CHARACTER: dict[str, Any] = {
    "name": "Bench",
    "bio": ["Bench answers quickly."],
    "messageExamples": [
        [
            {"user": "{{user1}}", "content": {"text": "hello"}},
            {"user": "Bench", "content": {"text": "Hi!"}},
        ]
    ],
}
_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_ready(url: str, *, seconds: float = 60.0, path: str = "/health") -> float:
    """Wait until ``url`` answers ``path`` with 200; returns when (``time.perf_counter()``)."""
    deadline = time.perf_counter() + seconds
    async with httpx.AsyncClient(base_url=url, timeout=5) as http:
        while time.perf_counter() < deadline:
            try:
                if (await http.get(path)).status_code == 200:
                    return time.perf_counter()
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise RuntimeError(f"the server at {url} did not answer {path} within {seconds:.0f} s")


async def new_agent(url: str, name: str) -> str:
    """Create an agent named ``name`` and start it; its id."""
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=120) as http:
        created = await http.post("/agents", json={**CHARACTER, "name": name})
        agent_id: str = created.raise_for_status().json()["id"]
        (await http.post(f"/agents/{agent_id}/start")).raise_for_status()
    return agent_id


async def stop_agent(url: str, agent_id: str) -> None:
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=120) as http:
        (await http.post(f"/agents/{agent_id}/stop")).raise_for_status()


_STAGE = re.compile(r'^carrier_turn_stage_seconds_(sum|count)\{stage="([^"]+)"\} (\S+)$')


async def stage_totals(url: str) -> dict[str, tuple[float, float]]:
    """``{stage: (seconds, turns)}`` so far, from ``GET /metrics`` (every turn's trace timings,
    summed by the API's ``on_turn_end`` hook)."""
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=30) as http:
        text = (await http.get("/metrics")).raise_for_status().text
    totals: dict[str, list[float]] = {}
    for line in text.splitlines():
        m = _STAGE.match(line)
        if m:
            slot = totals.setdefault(m.group(2), [0.0, 0.0])
            slot[0 if m.group(1) == "sum" else 1] = float(m.group(3))
    return {stage: (s, c) for stage, (s, c) in totals.items()}


def stage_means(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]
) -> dict[str, float]:
    """Mean milliseconds per turn in each stage between two :func:`stage_totals`."""
    out = {}
    for stage, (seconds, count) in after.items():
        s0, c0 = before.get(stage, (0.0, 0.0))
        if count > c0:
            out[stage] = (seconds - s0) / (count - c0) * 1000
    return out


@dataclass
class CpuSample:
    """CPU seconds a process has used, in all and by thread (the main thread runs the event
    loop), at one moment."""

    at: float
    total: float
    threads: dict[int, float]


def _seconds(stat: str) -> float:
    # Fields after the command name (which may hold spaces): utime and stime are 14 and 15.
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def cpu_sample(pid: int) -> CpuSample:
    proc = Path(f"/proc/{pid}")
    threads: dict[int, float] = {}
    for task in (proc / "task").iterdir():
        try:
            threads[int(task.name)] = _seconds((task / "stat").read_text())
        except (FileNotFoundError, ProcessLookupError):  # a thread that just ended
            continue
    return CpuSample(time.perf_counter(), _seconds((proc / "stat").read_text()), threads)


def cpu_between(pid: int, a: CpuSample, b: CpuSample) -> dict[str, Any]:
    """Cores used between two samples: the whole process, its event loop (main thread), and
    the busiest other threads (torch's, the embedder's, SQLite's...)."""
    wall = max(b.at - a.at, 1e-9)
    per = {tid: (t - a.threads.get(tid, 0.0)) / wall for tid, t in b.threads.items()}
    others = sorted((c for tid, c in per.items() if tid != pid), reverse=True)
    return {
        "cpu_s": b.total - a.total,
        "cores": (b.total - a.total) / wall,
        "event_loop_cores": per.get(pid, 0.0),
        "other_threads_cores": [round(c, 3) for c in others[:5] if c >= 0.005],
    }
