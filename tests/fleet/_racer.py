"""A process for the multi-process test: adds revisions to one agent and races for one lease in
a shared SQLite file, once the test says go (a line on stdin), and prints what it got.

python -m tests.fleet._racer PATH OWNER COUNT
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from carrier.fleet.model import RevisionSource
from carrier.fleet.sqlite import SQLiteFleetStore


async def main(path: Path, owner: str, count: int) -> dict[str, Any]:
    async with SQLiteFleetStore(path=path) as fleet:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        numbers = [
            (
                await fleet.add_revision(
                    "harbor", {"name": f"{owner} {n}"}, source=RevisionSource.CLI, actor=owner
                )
            ).number
            for n in range(count)
        ]
        lease = await fleet.acquire("discord:race", owner, ttl_s=600)
    return {"numbers": numbers, "lease": lease is not None}


if __name__ == "__main__":
    result = asyncio.run(main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
    print(json.dumps(result), flush=True)
