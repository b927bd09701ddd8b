"""A worker process for the multi-process test: drains a job store file, prints the ids it ran.

python -m tests.jobs._drain_worker PATH WORKER_ID
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from carrier.jobs import Job, JobContext, SQLiteJobStore, Worker


async def main(path: Path, worker_id: str) -> list[str]:
    ran: list[str] = []

    async def handler(job: Job, ctx: JobContext) -> Mapping[str, Any]:
        ran.append(job.id)
        await asyncio.sleep(0)  # let the other jobs in flight interleave
        return {"by": ctx.worker_id}

    async with SQLiteJobStore(path=path) as store:
        worker = Worker(store=store, worker_id=worker_id, max_concurrent=4, lease_s=600)
        worker.register("k", handler)
        await worker.drain()
    return ran


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))))
