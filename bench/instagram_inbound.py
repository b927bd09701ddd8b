"""Instagram comments in a burst: 1,000 comments across 50 posts delivered by webhook at once.

    python -m bench.instagram_inbound [--comments 1000] [--posts 50] [--concurrency 50]

The fake Graph API (loopback HTTP) holds the posts and the comments and delivers each comment as
its own signed webhook to Carrier's real API server (uvicorn, in this process), 5 % of them
twice (Meta duplicates deliveries); the receiver stores each as an ``instagram.inbound`` job.
Then the job worker answers them through the pipeline (a model that answers at once, the hashing
embedder, SQLite), with moderation hiding spam. The mix: questions (answered), remarks (skipped:
not a question), spam (hidden).

Prints how fast the deliveries were acknowledged and answered (replies/s), and checks that every
comment ended replied (one reply on the fake), skipped (with the policy's reason) or hidden, and
that nothing was answered twice. The figures are this machine's, with the model's time left out:
what the receiver, the job store, the pipeline and the Graph API calls cost.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import socket
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from carrier.agents import AgentManager
from carrier.api import ApiSettings
from carrier.api.server import api_server
from carrier.character import Character
from carrier.jobs import JobService, SQLiteJobStore
from carrier.llm.base import ModelRequest
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.settings import load_settings
from clients.instagram import InstagramClient, parse_config
from clients.instagram.fake import FakeComment, FakeGraphAPI
from clients.instagram.graph import GraphAPI, GraphPublisher
from clients.instagram.inbound.webhook import APP_SECRET_ENV, INBOUND_JOB_KIND
from clients.instagram.jobs import register_instagram_jobs
from clients.instagram.quota import PublishCounter

TOKEN, APP_SECRET = "bench-graph-token-0123456789", "bench-app-secret-0123456789"
QUESTIONS = ("what film is this?", "where was this taken?", "which lens did you use?")
REMARKS = ("love this", "beautiful light", "so good")
SPAM = ("free followers at my page", "dm for promo, cheap.shop")


def answer(request: ModelRequest) -> str:
    if request.purpose == "facts":
        return "[]"
    return (
        "<response><thought>t</thought><actions>REPLY</actions><text>portra 400.</text></response>"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _comments(fake: FakeGraphAPI, posts: int, count: int, rng: random.Random) -> list[FakeComment]:
    media = [fake.add_media(f"post {i}") for i in range(posts)]
    made = []
    for i in range(count):
        roll = rng.random()
        text = rng.choice(QUESTIONS if roll < 0.7 else REMARKS if roll < 0.9 else SPAM)
        made.append(
            fake.conversations.person_comments(
                media[i % posts], text, user_id=f"u{i}", username=f"person{i}"
            )
        )
    return made


async def run(comments: int, posts: int, concurrency: int, root: Path) -> dict[str, Any]:
    rng = random.Random(18)
    settings = load_settings({"CARRIER_DATA_DIR": str(root / "data")})
    with FakeGraphAPI(token=TOKEN, app_secret=APP_SECRET) as fake:
        async with SQLiteStore(path=root / "carrier.db") as store:
            jobs = SQLiteJobStore(path=root / "jobs.db")
            service = JobService(store=jobs)
            await jobs.open()

            def factory(runtime: Any, config: Any, environ: Any) -> InstagramClient:
                api = GraphAPI(access_token=TOKEN, ig_user_id=fake.ig_user_id, base_url=fake.url)
                counter = PublishCounter(store, "bench", limit=50)
                publisher = GraphPublisher(api=api, host=None, counter=counter)  # type: ignore[arg-type]
                return InstagramClient(
                    runtime=runtime,
                    config=parse_config(config),
                    environ=environ,
                    publisher=publisher,
                )

            model = FunctionModel(answer)
            manager = AgentManager(
                store=store,
                embedder=HashEmbedder(),
                settings=settings,
                environ={APP_SECRET_ENV: APP_SECRET},
                model_factory=lambda c: model,
                client_factories={"instagram": factory},
            )
            register_instagram_jobs(service, manager)
            character = {
                "name": "Lumen",
                "bio": ["Lumen shoots film."],
                "clients": ["instagram"],
                "clientConfig": {
                    "instagram": {
                        "igUserId": fake.ig_user_id,
                        "conversations": {
                            "maxRepliesPerHour": comments,
                            "maxRepliesPerPost": comments,
                            "personCooldown": 0,
                        },
                        "moderation": {"action": "hide"},
                    }
                },
            }
            record = await manager.create(Character.model_validate(character))
            await manager.start(record.id)
            made = _comments(fake, posts, comments, rng)
            port = _free_port()
            api_settings = ApiSettings(rate_per_minute=10**6, rate_burst=10**6)
            try:
                async with api_server(manager, settings, port=port, api_settings=api_settings):
                    fake.webhooks.url = f"http://127.0.0.1:{port}/webhooks/instagram"
                    limits = httpx.Limits(max_connections=concurrency)
                    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
                        gate = asyncio.Semaphore(concurrency)

                        async def deliver(comment: FakeComment) -> list[int]:
                            times = 2 if rng.random() < 0.05 else 1
                            async with gate:
                                payload = fake.webhooks.comment(comment)
                                return await fake.webhooks.deliver(payload, times=times, http=http)

                        began = time.perf_counter()
                        statuses = await asyncio.gather(*(deliver(c) for c in made))
                        acked = time.perf_counter() - began
                    began = time.perf_counter()
                    await service.worker.drain()
                    answered = time.perf_counter() - began
            finally:
                await manager.close()
                await service.stop(grace_s=0)
            results = await _outcomes(jobs, made, fake)
            results.update(
                deliveries=sum(len(s) for s in statuses),
                refused=sum(1 for s in statuses for code in s if code != 200),
                ack_s=acked,
                answer_s=answered,
            )
            return results


async def _outcomes(
    jobs: SQLiteJobStore, made: list[FakeComment], fake: FakeGraphAPI
) -> dict[str, Any]:
    async with jobs:
        found = await jobs.list_jobs(kind=INBOUND_JOB_KIND, limit=None)
    by_comment = {j.payload["id"]: j for j in found}
    outcome: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    problems: list[str] = []
    talk = fake.conversations
    for comment in made:
        job = by_comment.get(comment.id)
        result = (job.result if job is not None else None) or {}
        replies = len(talk.replies_to(comment.id))
        if result.get("replied"):
            outcome["replied"] += 1
            if replies != 1:
                problems.append(f"{comment.id}: {replies} replies")
        elif result.get("skipped"):
            outcome["skipped"] += 1
            reasons[str(result["skipped"])] += 1
        elif result.get("hidden"):
            outcome["hidden"] += 1
            if not talk.comments[comment.id].hidden:
                problems.append(f"{comment.id}: not hidden")
        else:
            outcome["other"] += 1
            problems.append(f"{comment.id}: {job.state if job else 'no job'} {result}")
        if replies > 1 or (replies and not result.get("replied")):
            problems.append(f"{comment.id}: {replies} replies")
    return {
        "jobs": len(found),
        "outcome": dict(outcome),
        "reasons": dict(reasons),
        "reply_calls": talk.reply_calls,
        "problems": problems,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comments", type=int, default=1000)
    parser.add_argument("--posts", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="carrier-ig-inbound-") as tmp:
        r = asyncio.run(run(args.comments, args.posts, args.concurrency, Path(tmp)))
    outcome = r["outcome"]
    print(
        f"{args.comments} comments on {args.posts} posts: {r['deliveries']} deliveries "
        f"({r['deliveries'] - args.comments} duplicates, {r['refused']} refused) acknowledged in "
        f"{r['ack_s']:.2f} s ({r['deliveries'] / r['ack_s']:.0f}/s); {r['jobs']} jobs"
    )
    print(
        f"answered in {r['answer_s']:.2f} s: {outcome.get('replied', 0)} replied "
        f"({outcome.get('replied', 0) / r['answer_s']:.1f} replies/s), "
        f"{outcome.get('skipped', 0)} skipped, {outcome.get('hidden', 0)} hidden, "
        f"{outcome.get('other', 0)} other; {r['reply_calls']} replies sent to Instagram"
    )
    for reason, n in sorted(r["reasons"].items(), key=lambda kv: -kv[1]):
        print(f"  skipped {n}: {reason}")
    if r["problems"]:
        print(f"PROBLEMS ({len(r['problems'])}):", *r["problems"][:20], sep="\n  ")
        raise SystemExit(1)
    print("every comment replied once, skipped with a reason, or hidden; no duplicates")


if __name__ == "__main__":
    main()
