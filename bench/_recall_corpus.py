"""The text and vectors ``bench/recall.py`` searches: real English sentences, real embeddings.

Texts come from what is installed here, so nothing is downloaded: the ``documentation`` strings of
botocore's service models (AWS API reference prose) and the prose paragraphs of docstrings in
site-packages, split into sentences, de-duplicated and shuffled with a fixed seed. That pool holds
a few hundred thousand sentences; memory ``i`` past the pool is two pool sentences joined (a
longer "message" whose vector the model really computes, not a perturbed copy). The last
:data:`QUERIES` sentences of the pool are never memories: they are the queries.

Everything is cached under ``bench/.cache/recall/``: the pool (``pool.txt``, one sentence a line)
and the vectors in chunks of :data:`CHUNK` rows (``<model>-<i>.npy``), so an interrupted run
resumes, and a 1M set reuses the 100k set's vectors.
"""

from __future__ import annotations

import ast
import gzip
import json
import random
import re
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np

CACHE = Path(__file__).resolve().parent / ".cache" / "recall"
CHUNK = 10_000
QUERIES = 1_000
_SEED = 20240501
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_TAG = re.compile(r"<[^>]+>")
_CODE_CHARS = set("`{}[]=>_\\|")


def _sentences(text: str) -> list[str]:
    out = []
    for raw in _SENTENCE_END.split(text):
        s = " ".join(raw.split())
        if (
            30 <= len(s) <= 240
            and s.count(" ") >= 4
            and s[0].isupper()
            and not _CODE_CHARS.intersection(s)
        ):
            out.append(s)
    return out


def _build_pool() -> list[str]:
    site = Path(np.__file__).resolve().parents[1]
    seen: set[str] = set()
    for path in sorted(site.glob("botocore/data/*/*/service-2.json*")):
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        for match in re.finditer(rb'"documentation":"((?:[^"\\]|\\.)*)"', data):
            try:
                text = json.loads(b'"' + match.group(1) + b'"')
            except ValueError:
                continue
            seen.update(_sentences(_TAG.sub(" ", text)))
    for path in sorted(site.rglob("*.py")):
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc:
                    for paragraph in doc.split("\n\n"):
                        seen.update(_sentences(paragraph))
    pool = sorted(seen)
    random.Random(_SEED).shuffle(pool)
    return pool


def pool() -> list[str]:
    """The shuffled sentence pool (built once, a few minutes; then read from the cache)."""
    path = CACHE / "pool.txt"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        sentences = _build_pool()
        tmp = path.with_suffix(".tmp")
        tmp.write_text("\n".join(sentences) + "\n", encoding="utf-8")
        tmp.rename(path)
        print(f"built a pool of {len(sentences)} sentences in {time.perf_counter() - t:.0f} s")
    return path.read_text(encoding="utf-8").splitlines()


def queries() -> list[str]:
    return pool()[-QUERIES:]


def texts(n: int) -> list[str]:
    """Memory texts ``0..n-1``: pool sentences, then pairs of them (labelled in the output)."""
    sentences = pool()[:-QUERIES]
    if n <= len(sentences):
        return sentences[:n]
    rng = random.Random(_SEED + 1)
    extra = [
        f"{sentences[rng.randrange(len(sentences))]} {sentences[rng.randrange(len(sentences))]}"
        for _ in range(n - len(sentences))
    ]
    return sentences + extra


def real_count() -> int:
    """How many memories are single pool sentences (the rest are pairs)."""
    return len(pool()) - QUERIES


Encode = Callable[[list[str]], Awaitable[np.ndarray]]


async def vectors(n: int, model: str, encode: Encode | None) -> np.ndarray:
    """``(n, dim)`` float32 vectors of ``texts(n)``, embedding (and caching) missing chunks."""
    all_texts = texts(n)
    chunks = []
    for start in range(0, n, CHUNK):
        index = start // CHUNK
        path = CACHE / f"{model}-{index:03d}.npy"
        if path.exists():
            chunk = np.load(path, mmap_mode="r")
        else:
            if encode is None:
                raise RuntimeError(f"no cached vectors for chunk {index} and nothing to embed with")
            chunk_texts = (all_texts if start + CHUNK <= n else texts(start + CHUNK))[
                start : start + CHUNK
            ]
            t = time.perf_counter()
            parts = []
            for i in range(0, len(chunk_texts), 1000):
                parts.append(await encode(chunk_texts[i : i + 1000]))
                done = i + 1000
                rate = done / (time.perf_counter() - t)
                print(
                    f"\r  embedding chunk {index} ({start}..{start + CHUNK}): {done}/{CHUNK} "
                    f"{rate:.0f}/s",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
            print(file=sys.stderr)
            chunk = np.concatenate(parts).astype(np.float32)
            tmp = path.with_suffix(".tmp.npy")
            np.save(tmp, chunk)
            tmp.rename(path)
        chunks.append(np.asarray(chunk[: n - start]))
    return np.concatenate(chunks) if chunks else np.zeros((0, 0), dtype=np.float32)
