"""Embedding throughput under many conversations: 64 concurrent turns, each embedding one message
at a time, against the model's batched rate (one call with many texts), through the same
:class:`~carrier.memory.sentence.SentenceTransformerEmbedder` (cache off, every text new).

    .venv/bin/python bench/embed_load.py --turns 64 --rounds 3

Each round measures, back to back: the batched rate, the concurrent turns with micro-batching,
and the same turns with batching off (``batch_size=1``: one model call per text). Rounds
interleave the three so that other load on the machine touches each alike; the medians and the
ratio concurrent / batched are printed. Texts are real sentences (see bench/_recall_corpus.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _recall_corpus as corpus

from carrier.memory.sentence import SentenceTransformerEmbedder


class Counting(SentenceTransformerEmbedder):
    """Records the size of every model call."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.calls: list[int] = []

    async def _encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        return await super()._encode(texts)


async def turns(embedder: Counting, texts: list[str], n_turns: int) -> float:
    """Texts per second when ``n_turns`` conversations each embed their messages one by one."""
    per_turn = [texts[i::n_turns] for i in range(n_turns)]

    async def conversation(messages: list[str]) -> None:
        for message in messages:
            await embedder.embed_one(message)

    t = time.perf_counter()
    await asyncio.gather(*(conversation(m) for m in per_turn))
    return len(texts) / (time.perf_counter() - t)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=64)
    parser.add_argument("--per-turn", type=int, default=8, help="messages per turn per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    args = parser.parse_args()

    batched = Counting(cache_size=0, threads=args.threads)
    single = Counting(cache_size=0, batch_size=1, threads=args.threads)
    await batched.load()
    single._model = batched._model  # one model, two batching policies
    sentences = [s for s in corpus.pool()[: -corpus.QUERIES] if len(s) <= 120]
    n = args.turns * args.per_turn
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()}")
    print(f"{args.turns} turns x {args.per_turn} messages = {n} texts per measurement")
    await batched.embed(sentences[:64])  # warm up

    rates: dict[str, list[float]] = {"batched": [], "turns": [], "turns-unbatched": []}
    offset = 64
    for r in range(args.rounds):
        chunk = sentences[offset : offset + 3 * n]
        offset += 3 * n
        t = time.perf_counter()
        await batched.embed(chunk[:n])
        rates["batched"].append(n / (time.perf_counter() - t))
        batched.calls.clear()
        rates["turns"].append(await turns(batched, chunk[n : 2 * n], args.turns))
        sizes = list(batched.calls)
        rates["turns-unbatched"].append(await turns(single, chunk[2 * n :], args.turns))
        print(
            f"round {r + 1}: batched {rates['batched'][-1]:6.1f}/s  "
            f"{args.turns} turns {rates['turns'][-1]:6.1f}/s "
            f"({len(sizes)} model calls, mean batch {statistics.mean(sizes):.1f})  "
            f"unbatched turns {rates['turns-unbatched'][-1]:6.1f}/s  load {os.getloadavg()[0]:.1f}"
        )
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(
        f"median: batched {med['batched']:.1f}/s, {args.turns} concurrent turns {med['turns']:.1f}/s "
        f"= {med['turns'] / med['batched']:.0%} of batched; without micro-batching "
        f"{med['turns-unbatched']:.1f}/s = {med['turns-unbatched'] / med['batched']:.0%}"
    )


if __name__ == "__main__":
    asyncio.run(main())
