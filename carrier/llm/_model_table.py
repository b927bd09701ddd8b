"""litellm's model table, read without importing litellm (which takes seconds of CPU): prices,
modes and the name rules litellm infers capabilities by, for the lean model call
(:mod:`carrier.llm._direct`).

With ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (Carrier sets it before litellm loads) litellm's
``model_cost`` is the JSON file it ships, ``model_prices_and_context_window_backup.json``, as
its ``get_model_cost_map`` finalizes it: the ``fallback_generalizations`` block taken out (the
name rules), alias rows expanded into their owner's entry. This module reads that file from the
installed package's directory (found with :func:`importlib.util.find_spec`, which runs none of
litellm's code) once, on first use, and does the same.

:func:`openai_rates` gives what ``litellm.cost_per_token`` charges per prompt and completion
token of an ``openai/`` model, the entry found as litellm finds it (case-insensitively, without a
dated snapshot suffix), where the answer is plain to read off the table (tests check it against
litellm for every name in it); ``None`` where it is not (tiered prices, an entry of another
provider, a fine-tune, a name rule that carries prices, a field not known here): litellm must
price that one.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeGuard

__all__ = ["TABLE_FILE", "ModelTable", "model_table", "openai_rates"]

log = logging.getLogger(__name__)

TABLE_FILE = "model_prices_and_context_window_backup.json"
_RULES = "fallback_generalizations"
_PREFIX = "openai/"

Entry = Mapping[str, Any]


class ModelTable:
    """litellm's ``model_cost`` (``entries``) and its name rules, from the table's raw JSON."""

    def __init__(self, raw: dict[str, Any]) -> None:
        raw = dict(raw)
        rules = raw.pop(_RULES, None)
        self.entries: dict[str, Entry] = _expand_aliases(
            {key: value for key, value in raw.items() if isinstance(value, dict)}
        )
        self._lower = {key.lower(): key for key in self.entries}
        self.openai_chat = frozenset(
            key
            for key, info in self.entries.items()
            if info.get("litellm_provider") == "openai" and not _is_finetune(key)
        )
        """``litellm.open_ai_chat_completion_models``: the table's ``openai`` rows, fine-tunes
        (``ft:<model>``) left out."""
        self.capability_rules: list[tuple[re.Pattern[str], Entry, frozenset[str]]] = []
        """The name rules that add to a model's entry (not those that only name its provider):
        pattern, what they add, the providers whose own entries they fill in."""
        listed = rules.get("rules") if isinstance(rules, dict) else None
        for rule in listed if isinstance(listed, list) else ():
            info = rule.get("model_info") if isinstance(rule, dict) else None
            if not isinstance(info, dict) or "litellm_provider" in info:
                continue
            try:
                pattern = re.compile(str(rule.get("pattern")), re.IGNORECASE)
            except re.error:
                continue
            fills = rule.get("fill_missing_for_providers") or ()
            self.capability_rules.append((pattern, info, frozenset(map(str, fills))))

    def find(self, name: str) -> str | None:
        """The key litellm finds ``name`` under: itself, or case-insensitively."""
        if name in self.entries:
            return name
        return self._lower.get(name.lower())

    def rules_for(self, name: str) -> list[Entry]:
        """What the capability rules matching ``name`` say of it."""
        return [info for pattern, info, _ in self.capability_rules if pattern.search(name)]

    def _openai_lookup(self, model: str) -> tuple[list[str], str | None] | None:
        """How litellm looks ``model`` (``openai/<name>``) up: the names it tries and the key it
        finds among them (None: none); None for a fine-tune (``ft:<model>``), which litellm
        resolves to its base model by its own rules."""
        name = model[len(_PREFIX) :]
        if "ft:" in name:
            return None
        # cost_per_token's choice of key, then get_model_info's lookup under provider openai.
        key = model if model in self.entries else name if name in self.entries else model
        tried = _candidates(key)
        return tried, next((k for k in map(self.find, tried) if k is not None), None)

    def openai_rates(self, model: str) -> tuple[float, float] | None:
        """US dollars per prompt and completion token of ``model`` (``openai/<name>``) as
        ``litellm.cost_per_token`` charges them, ``(0, 0)`` for a model it has no price for;
        None when that is not plain from the table."""
        lookup = self._openai_lookup(model)
        if lookup is None:
            return None
        tried, found = lookup
        if found is None:
            priced = any(not _prices_nothing(info) for c in tried for info in self.rules_for(c))
            return None if priced else (0.0, 0.0)
        info = self.entries[found]
        if info.get("litellm_provider") not in (None, "openai"):
            return None  # litellm would look further; let it
        fills = [
            rule
            for pattern, rule, providers in self.capability_rules
            if "openai" in providers and pattern.search(found)
        ]
        if not all(_prices_nothing(rule) for rule in fills):
            return None
        return _simple_rates(info)

    def openai_vision(self, model: str) -> bool | None:
        """Whether ``litellm.supports_vision`` says ``model`` (``openai/<name>``) reads images,
        from its entry (found as :meth:`openai_rates` finds it); None when that is not plain
        from the table (a fine-tune, another provider's entry, a name rule that says so)."""
        lookup = self._openai_lookup(model)
        if lookup is None:
            return None
        tried, found = lookup
        if found is None:
            ruled = any("supports_vision" in i for c in tried for i in self.rules_for(c))
            return None if ruled else False
        info = self.entries[found]
        if info.get("litellm_provider") not in (None, "openai"):
            return None
        if any("supports_vision" in rule for rule in self.rules_for(found)):
            return None
        return bool(info.get("supports_vision"))


def _expand_aliases(entries: dict[str, Entry]) -> dict[str, Entry]:
    """litellm's ``_expand_model_aliases``: a row with ``alias_of`` is served as the row it
    names, a row's ``aliases`` list adds names for it; colliding or dangling ones are dropped."""
    pointers = {k: v["alias_of"] for k, v in entries.items() if isinstance(v.get("alias_of"), str)}
    owners: dict[str, str] = {}
    listed: list[str] = []
    for key, info in entries.items():
        aliases = info.get("aliases")
        if aliases is None or key in pointers:
            continue
        listed.append(key)
        if not isinstance(aliases, list):
            continue
        for alias in aliases:
            if (alias in entries and alias not in pointers) or alias in owners:
                continue
            owners[alias] = key
    for alias, target in pointers.items():
        if target in entries and target not in pointers and alias not in owners:
            owners[alias] = target
    for key in listed:
        entries[key] = {k: v for k, v in entries[key].items() if k != "aliases"}
    for alias in pointers.keys() - owners.keys():
        entries.pop(alias)
    for alias, owner in owners.items():
        entries[alias] = entries[owner]
    return entries


def _is_finetune(key: str) -> bool:
    return key.startswith("ft:") and not key.count(":") > 1


_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def _candidates(model: str) -> list[str]:
    """The names litellm's ``get_model_info`` tries for ``model`` under provider ``openai``,
    in order (not for fine-tunes)."""
    split = model[len(_PREFIX) :] if model.startswith(_PREFIX) else model
    combined = _PREFIX + split if not model.startswith(_PREFIX) else model
    stripped = _SNAPSHOT.sub("", split)
    prefixed = _PREFIX + model
    return [combined, model, split, _PREFIX + stripped, stripped, prefixed]


# Keys that do not change what a call of prompt and completion tokens costs at the standard
# tier: facts about the model, and prices for what such a call has none of (cached, audio or
# image tokens, another service tier or call type, a regional or FedRAMP endpoint, web search).
_FACTS = frozenset(
    {
        "litellm_provider",
        "mode",
        "max_tokens",
        "max_input_tokens",
        "max_output_tokens",
        "source",
        "comment",
        "deprecation_date",
        "deprecation_source",
        "successor_model",
        "supported_endpoints",
        "supported_modalities",
        "supported_output_modalities",
        "supported_regions",
        "reasoning_contexts",
        "reasoning_modes",
        "reasoning_effort_levels",
        "default_reasoning_effort",
    }
)
_UNUSED_PRICES = frozenset(
    {
        "cache_read_input_token_cost",
        "cache_creation_input_token_cost",
        "cache_read_input_audio_token_cost",
        "cache_creation_input_audio_token_cost",
        "cache_read_input_image_token_cost",
        "input_cost_per_audio_token",
        "output_cost_per_audio_token",
        "input_cost_per_image_token",
        "fedramp_uplift_multiplier",
        "regional_processing_uplift_multiplier_eu",
        "regional_processing_uplift_multiplier_us",
        "search_context_cost_per_query",
    }
)
_OTHER_TIERS = ("_batches", "_flex", "_priority", "_ultrafast", "_balanced", "_decisions")
_RATES = ("input_cost_per_token", "output_cost_per_token")


def _harmless(key: str) -> bool:
    if "_above_" in key:  # a tier by prompt size
        return False
    return (
        key in _FACTS
        or key in _UNUSED_PRICES
        or key.startswith("supports_")
        or (key.endswith(_OTHER_TIERS) and key.startswith(("input_cost", "output_cost", "cache_")))
    )


def _prices_nothing(info: Entry) -> bool:
    return all(key in _FACTS or key.startswith("supports_") for key in info)


def _simple_rates(info: Entry) -> tuple[float, float] | None:
    prompt, completion = (info.get(key) for key in _RATES)
    if not (_rate(prompt) and _rate(completion)):
        return None
    if not all(key in _RATES or _harmless(key) for key in info):
        return None
    return float(prompt), float(completion)


def _rate(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


_table: ModelTable | None = None
_read = False
_lock = threading.Lock()


def table_path() -> Path | None:
    """Where the installed litellm keeps its table (its code is not run to find out)."""
    spec = importlib.util.find_spec("litellm")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    return Path(locations[0]) / TABLE_FILE if locations else None


def model_table() -> ModelTable | None:
    """The table, read once (~30 ms; call it off the event loop first when that matters); None
    when litellm would not use it (``LITELLM_LOCAL_MODEL_COST_MAP`` set to anything but true:
    litellm then fetches its map) or it cannot be read: litellm then decides everything."""
    global _table, _read
    if _read:
        return _table
    with _lock:
        if not _read:
            if os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "True").lower() == "true":
                try:
                    path = table_path()
                    if path is not None:
                        _table = ModelTable(json.loads(path.read_bytes()))
                except (OSError, ValueError, AttributeError, TypeError) as exc:
                    log.debug("litellm's model table could not be read: %s", exc)
            _read = True
    return _table


_rates: dict[str, tuple[float, float] | None] = {}


def openai_rates(model: str) -> tuple[float, float] | None:
    """:meth:`ModelTable.openai_rates` of the table (cached by model); None without a table."""
    if model not in _rates:
        table = model_table()
        _rates[model] = table.openai_rates(model) if table is not None else None
    return _rates[model]


def openai_vision(model: str) -> bool | None:
    """:meth:`ModelTable.openai_vision` of the table; None without a table."""
    table = model_table()
    return table.openai_vision(model) if table is not None else None
