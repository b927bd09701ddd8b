"""A deterministic embedder with no model: for unit tests and machines without torch."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from carrier.memory.embedder import DEFAULT_CACHE_SIZE, Embedder

__all__ = ["HashEmbedder"]

_WORD = re.compile(r"\w+")


class HashEmbedder(Embedder):
    """Hashing-trick bag of words (plus character trigrams) folded into ``dim`` dimensions.

    The same text always gives the same vector, in every process. Texts that share words (or word
    fragments) score higher cosine than texts that share none, which is enough for tests of
    recall and ranking; it knows nothing of meaning (``car`` and ``automobile`` are unrelated).
    """

    name = "hash"

    def __init__(
        self, *, dim: int = 256, trigram_weight: float = 0.5, cache_size: int = DEFAULT_CACHE_SIZE
    ) -> None:
        super().__init__(cache_size=cache_size)
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.dim = dim
        self.trigram_weight = trigram_weight

    async def _encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in self._features(text):
                digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                sign = 1.0 if value & 1 else -1.0  # signed hashing: collisions cancel, not pile up
                out[row, (value >> 1) % self.dim] += sign * weight
        return out

    def _features(self, text: str) -> list[tuple[str, float]]:
        features: list[tuple[str, float]] = []
        for word in _WORD.findall(text.lower()):
            features.append(("w:" + word, 1.0))
            if self.trigram_weight:
                padded = f"<{word}>"
                features.extend(
                    ("t:" + padded[i : i + 3], self.trigram_weight) for i in range(len(padded) - 2)
                )
        return features
