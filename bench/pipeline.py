"""Pipeline overhead per message: everything but the language model.

A fake model answers instantly; the embedder is the real all-MiniLM-L6-v2; the store is a real
SQLite file, prefilled with ``--prefill`` memories embedded by the real model (cached on disk under
bench/.cache so reruns are fast). Prints p50/p95 per message and their ratio to one embedding call
(the unavoidable work of a turn) and to one embedding plus one recall at the prefill size; those
reference calls and the turns are timed in alternating blocks of 25, and the last ratio is also
given block by block (its median is the figure a burst of machine noise moves least). The fake
model's reply is one fixed text, so its embedding comes from the embedder's cache after the first
turn: a real reply costs one more embedding call. Background work (fact extraction, summaries)
waits for the turns to leave their busy stages: the agent finishes it after each block of turns,
before the reference block, untimed on either side, and its time per turn is printed apart.

    .venv/bin/python bench/pipeline.py --messages 300 --prefill 2000
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from carrier.character import load_character
from carrier.llm.fake import FunctionModel
from carrier.memory.sentence import SentenceTransformerEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.runtime import AgentRuntime
from carrier.types import Author, Channel, Content, Memory, MemoryKind, Message, RoomKind, stable_id

CACHE = Path(__file__).resolve().parent / ".cache"
BLOCK = 25
"""Turns (and reference calls) per block when the two take turns."""
SUBJECTS = [
    "the shader",
    "my sprite sheet",
    "the jam theme",
    "our level editor",
    "the boss fight",
    "pixel fonts",
    "the physics step",
    "a save system",
    "the soundtrack",
    "the tilemap",
    "netcode",
    "the trailer",
]
VERBS = [
    "keeps breaking",
    "looks great",
    "needs feedback",
    "is finally done",
    "runs at 12 fps",
    "confuses players",
    "was rewritten",
    "needs a name",
    "crashes on load",
    "feels too slow",
]
TAILS = [
    "any ideas?",
    "what do you think?",
    "lol",
    "since yesterday",
    "on linux only",
    "after the last patch",
    "for the jam",
    "in godot",
    "with the new palette",
    "and I love it",
]


def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(TAILS)} #{i}" for i in range(n)
    ]


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


async def prefill(
    store: SQLiteStore, embedder: SentenceTransformerEmbedder, agent_id: str, n: int
) -> None:
    """``n`` messages over 50 rooms and 200 people, their vectors from the real model (cached
    under bench/.cache: embedding 100k texts takes minutes)."""
    CACHE.mkdir(exist_ok=True)
    cached = CACHE / f"prefill-{n}.npy"
    texts = sentences(n, seed=42)
    if cached.exists():
        vectors = np.load(cached)
    else:
        t = time.perf_counter()
        vectors = await embedder.embed(texts)
        np.save(cached, vectors)
        print(f"embedded {n} prefill texts in {time.perf_counter() - t:.1f}s (cached for reruns)")
    t = time.perf_counter()
    for i, (text, vec) in enumerate(zip(texts, vectors, strict=True)):
        await store.add_memory(
            Memory(
                agent_id=agent_id,
                room_id=stable_id("bench-room", str(i % 50)),
                entity_id=stable_id("bench-user", str(i % 200)),
                kind=MemoryKind.MESSAGE,
                content=Content(text=text, metadata={"speaker": f"user{i % 200}"}),
                embedding=vec.tolist(),
                embedding_model=embedder.model_id,
            )
        )
    print(f"prefilled {n} memories in {time.perf_counter() - t:.1f}s")


async def measure(
    runtime: AgentRuntime,
    store: SQLiteStore,
    embedder: SentenceTransformerEmbedder,
    args: argparse.Namespace,
) -> None:
    # Agent start loads the vectors (and ANN index) in the background; wait for it, as a
    # long-running agent would have, so the figures are of steady-state turns.
    t = time.perf_counter()
    await runtime.start()
    await runtime.search_ready()
    print(f"agent start + vector search ready: {time.perf_counter() - t:.1f}s")

    queries = sentences(args.messages, seed=7)
    fresh = sentences(args.messages, seed=99)
    # The unavoidable work (one embedding of a new text and one recall over the store) and
    # the turns are timed in alternating blocks, so a drift in the machine's speed during the
    # run touches both alike.
    embed_times: list[float] = []
    recall_times: list[float] = []
    times: list[float] = []
    stages: dict[str, list[float]] = collections.defaultdict(list)
    block_ratios = []
    background = 0.0
    for start in range(0, args.messages, BLOCK):
        block = len(times), len(embed_times)
        for q in fresh[start : start + BLOCK]:
            t = time.perf_counter()
            vec = await embedder.embed_one(q + " (fresh)")
            embed_times.append(time.perf_counter() - t)
            t = time.perf_counter()
            await store.search_memories(
                agent_id=runtime.agent_id,
                embedding=vec.tolist(),
                embedding_model=embedder.model_id,
                k=6,
            )
            recall_times.append(time.perf_counter() - t)
        for i in range(start, min(start + BLOCK, args.messages)):
            msg = Message(
                platform="bench",
                author=Author(platform_id=f"u{i % 25}", name=f"user{i % 25}"),
                channel=Channel(platform_id=f"c{i % args.rooms}", kind=RoomKind.DM),
                text=queries[i],
            )
            t = time.perf_counter()
            result = await runtime.handle(msg)
            times.append(time.perf_counter() - t)
            for name, ms in result.trace.get("timings_ms", {}).items():
                stages[name].append(ms)
        # What the block's turns left to the background runs now, before the reference block
        # (it would slow those calls instead), timed on its own.
        t = time.perf_counter()
        await runtime.settled()
        background += time.perf_counter() - t
        reference = statistics.median(embed_times[block[1] :]) + statistics.median(
            recall_times[block[1] :]
        )
        block_ratios.append(statistics.median(times[block[0] :]) / reference)

    ms = [t * 1000 for t in times]
    e_ms = statistics.median(embed_times) * 1000
    r_ms = statistics.median(recall_times) * 1000
    print(f"messages: {args.messages}  prefill: {args.prefill}  rooms: {args.rooms}")
    print(f"one embedding call: p50 {e_ms:.2f} ms   one recall: p50 {r_ms:.2f} ms")
    print(f"pipeline overhead per message: p50 {pct(ms, 50):.2f} ms   p95 {pct(ms, 95):.2f} ms")
    print(
        f"ratio to one embedding call: p50 {pct(ms, 50) / e_ms:.2f}x   p95 {pct(ms, 95) / e_ms:.2f}x"
    )
    print(f"ratio to one embedding + one recall: p50 {pct(ms, 50) / (e_ms + r_ms):.2f}x")
    # The same ratio block by block (each block of turns against the reference block timed just
    # before it): a burst of machine noise then skews one block, not the whole figure.
    print(
        f"  block by block ({len(block_ratios)} blocks): median {statistics.median(block_ratios):.2f}x"
        f"   quartiles {pct(block_ratios, 25):.2f}x-{pct(block_ratios, 75):.2f}x"
    )
    print(
        f"background work after the turns (untimed in them): {background * 1000 / len(times):.2f}"
        f" ms a turn ({runtime.background.stats.done} jobs,"
        f" {runtime.background.stats.coalesced} coalesced)"
    )
    print(
        "per stage p50/p95 ms: "
        + ", ".join(f"{n} {pct(v, 50):.1f}/{pct(v, 95):.1f}" for n, v in stages.items())
    )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--prefill", type=int, default=2000)
    parser.add_argument("--rooms", type=int, default=10)
    parser.add_argument("--character", default="characters/harbor.yaml")
    parser.add_argument(
        "--db",
        type=Path,
        help="a copy of the prefilled database is kept here and reused by later runs",
    )
    args = parser.parse_args()

    character = load_character(args.character)
    embedder = SentenceTransformerEmbedder()
    await embedder.embed(["warm up"])

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        reuse = args.db is not None and args.db.exists()
        if reuse:
            shutil.copyfile(args.db, db)
            print(f"reusing the prefilled database {args.db}")
        agent_id = character.agent_id
        if args.prefill and not reuse:
            store = SQLiteStore(path=db)
            await store.open()
            try:
                await prefill(store, embedder, agent_id, args.prefill)
            finally:
                await store.close()
            if args.db is not None:
                shutil.copyfile(db, args.db)
        # Opened after the prefill, as after a restart: the vector index is empty and the
        # agent's start loads it.
        store = SQLiteStore(path=db)
        await store.open()
        runtime = AgentRuntime(
            character=character,
            store=store,
            embedder=embedder,
            model=FunctionModel(
                lambda r: (
                    "<response><thought>t</thought><actions>REPLY</actions><text>ok!</text></response>"
                )
            ),
            seed=1,
        )
        try:
            await measure(runtime, store, embedder, args)
        finally:
            await runtime.stop()
            await store.close()


if __name__ == "__main__":
    asyncio.run(main())
