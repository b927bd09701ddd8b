"""What recording the time series costs: a turn's share (the ``on_turn_end`` hook's in-memory
counting, and the budgets' check before a model call) and a flush's write, on SQLite.

    .venv/bin/python bench/series.py                    # 5 agents, 10 000 turns
    .venv/bin/python bench/series.py --agents 50 --turns 50000

Compare with a turn of the pipeline (``bench/api.py``, ``bench/pipeline.py``): milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from carrier.llm.budget import Budget, Budgets
from carrier.series import SeriesRecorder, SQLiteSeriesStore
from carrier.types import Usage

TIMINGS = {"receive": 2.1, "message": 4.0, "state": 9.5, "generate": 310.0, "evaluate": 12.0}


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="carrier-bench-series-") as tmp:
        async with SQLiteSeriesStore(path=Path(tmp) / "carrier.db") as store:
            recorder = SeriesRecorder(store)
            budgets = Budgets(recorder, global_=Budget(day_usd=1e9))
            budget = Budget(day_usd=1e9, month_usd=1e9)
            usage = Usage(prompt_tokens=800, completion_tokens=60, cost_usd=0.0004, calls=2)
            agents = [f"agent-{n}" for n in range(args.agents)]
            began = time.perf_counter()
            for i in range(args.turns):
                recorder.observe_turn(
                    agents[i % len(agents)], failed=False, usage=usage, timings_ms=TIMINGS
                )
            per_turn = (time.perf_counter() - began) / args.turns * 1e6
            await recorder.flush()  # this month's spending is read back: checks sum from it
            began = time.perf_counter()
            for i in range(args.turns):
                budgets.check(agents[i % len(agents)], budget)
            per_check = (time.perf_counter() - began) / args.turns * 1e6
            flushes = []
            for _ in range(5):
                for i in range(args.turns // 10):
                    recorder.observe_turn(
                        agents[i % len(agents)], failed=False, usage=usage, timings_ms=TIMINGS
                    )
                began = time.perf_counter()
                await recorder.flush()
                flushes.append((time.perf_counter() - began) * 1000)
    print(f"{args.agents} agents, SQLite")
    print(f"  counting a turn (on_turn_end):         {per_turn:7.1f} µs")
    print(f"  budgets' check before a model call:    {per_check:7.1f} µs")
    print(
        f"  one flush after {args.turns // 10} turns (one write): {statistics.median(flushes):7.1f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--turns", type=int, default=10_000)
    asyncio.run(main(parser.parse_args()))
