"""A small in-memory LRU cache of model results, keyed by what determines an answer."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence

from carrier.llm.base import ModelRequest, ModelResult
from carrier.types import Usage


class ResponseCache:
    """Keeps the last ``size`` results; a hit is returned marked ``cached`` with zero usage."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, ModelResult] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def key(
        self, models: Sequence[str], request: ModelRequest, temperature: float | None
    ) -> str | None:
        """The key of ``request`` sent to ``models``; ``None`` when caching is off."""
        if self.size <= 0:
            return None
        payload = {
            "models": list(models),
            "messages": [m.model_dump(exclude_none=True) for m in request.messages],
            "temperature": temperature,
            "max_tokens": request.max_tokens,
            "stop": request.stop,
            "tools": request.tools,
        }
        blob = json.dumps(payload, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()

    def get(self, key: str | None) -> ModelResult | None:
        if key is None or key not in self._items:
            return None
        self._items.move_to_end(key)
        # The answer cost nothing this time.
        return self._items[key].model_copy(update={"cached": True, "usage": Usage()})

    def put(self, key: str | None, result: ModelResult) -> None:
        if key is None:
            return
        self._items[key] = result
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)
