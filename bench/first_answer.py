"""Time from ``carrier run`` (a warm data dir) to the first answered message.

A real ``carrier run CHARACTER`` subprocess serves the API on loopback; its model is
``openai/bench-model`` at the loopback model server (``bench/_model_server.py``, answering in
``--latency`` seconds), reached through litellm; the embedder is the real all-MiniLM-L6-v2. One
run first imports the character and answers a message (the data dir is then warm: the store,
the agent, its memories exist, the secret key is made), then each timed run starts
``carrier run`` again and sends a message as soon as the API takes one, again until one is
answered. Printed per run and as min / median / max:

- ``up``: from the spawn to the API's first 200 on ``/health``;
- ``first answer``: from the spawn to the first message answered (200);
- ``turn``: that answer's own request time (a normal turn costs about the model's latency).

    .venv/bin/python bench/first_answer.py                  # 5 timed runs, 1.0 s model
    .venv/bin/python bench/first_answer.py --runs 3 --json /tmp/first.json --label after
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from _served import AUTH, CHARACTER, free_port
from throughput import server_env


async def one_run(
    character: Path, data_dir: Path, model_url: str, *, turn: int
) -> dict[str, float]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = server_env(model_url, data_dir, {})
    began = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "carrier",
        "run",
        str(character),
        "--port",
        str(port),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    up: float | None = None
    try:
        async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=60) as http:
            agent_id: str | None = None
            while time.perf_counter() - began < 120:
                if proc.returncode is not None:
                    raise RuntimeError(f"carrier run exited with {proc.returncode}")
                try:
                    if up is None:
                        if (await http.get("/health")).status_code == 200:
                            up = time.perf_counter() - began
                        else:
                            await asyncio.sleep(0.01)
                        continue
                    if agent_id is None:
                        agents = (await http.get("/agents")).raise_for_status().json()
                        items = agents.get("items", agents) if isinstance(agents, dict) else agents
                        agent_id = str(items[0]["id"])
                    sent = time.perf_counter()
                    body = {"text": f"Are you there? This is start number {turn}.", "user_id": "u"}
                    response = await http.post(f"/{agent_id}/message", json=body)
                    if response.status_code == 200:
                        done = time.perf_counter()
                        return {"up_s": up, "first_answer_s": done - began, "turn_s": done - sent}
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.01)
        raise RuntimeError("no answer within 120 s")
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 60)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="carrier-bench-first-") as tmp:
        data_dir = Path(tmp) / "data"
        character = Path(tmp) / "bench.json"
        character.write_text(json.dumps(CHARACTER))
        model_port = free_port()
        model_url = f"http://127.0.0.1:{model_port}/v1"
        model = await asyncio.create_subprocess_exec(
            sys.executable,
            str(Path(__file__).with_name("_model_server.py")),
            "--port",
            str(model_port),
            "--latency",
            str(args.latency),
        )
        try:
            await asyncio.sleep(0.5)
            await one_run(character, data_dir, model_url, turn=0)  # the data dir is warm now
            runs = []
            print(
                f"[{args.label}] carrier run (warm data dir) → first answered message; model "
                f"answers in {args.latency:.1f} s; up / first answer / turn, seconds"
            )
            for i in range(args.runs):
                run = await one_run(character, data_dir, model_url, turn=i + 1)
                runs.append(run)
                print(
                    f"  run {i + 1}: {run['up_s']:.2f} / {run['first_answer_s']:.2f} / "
                    f"{run['turn_s']:.2f}"
                )
            figures = {key: [r[key] for r in runs] for key in ("up_s", "first_answer_s", "turn_s")}
            print(f"  up           min / median / max: {_spread(figures['up_s'])}")
            print(f"  first answer min / median / max: {_spread(figures['first_answer_s'])}")
            print(f"  its turn     min / median / max: {_spread(figures['turn_s'])}")
            return {"label": args.label, "latency_s": args.latency, "runs": runs}
        finally:
            model.send_signal(signal.SIGTERM)
            await model.wait()


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency", type=float, default=1.0, help="the model's answer time")
    parser.add_argument("--label", default="run")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parsed = parser.parse_args()
    result = asyncio.run(main(parsed))
    if parsed.json:
        parsed.json.write_text(json.dumps(result, indent=2))
