"""A job worker process that publishes Instagram posts, for the kill tests.

    python -m tests.clients.instagram._publish_worker CONFIG.json WORKER_ID

Builds the host of :mod:`tests.clients.instagram._publish_world` (the fake Graph API and the FTP
server run in the test's process), starts its job worker, prints ``ready``, and runs until it is
killed.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

from tests.clients.instagram._publish_world import HostConfig, open_host


async def main(config: HostConfig, worker_id: str) -> None:
    async with open_host(config, worker_id=worker_id) as host:
        await host.service.start()
        print("ready", flush=True)
        await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format=f"{sys.argv[2]} %(levelname)s %(message)s")
    asyncio.run(main(HostConfig.load(Path(sys.argv[1])), sys.argv[2]))
