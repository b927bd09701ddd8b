"""One redactor for everything that leaves Carrier: known secret values and secret-shaped text
become a fixed marker before text is sent, stored or logged.

Two kinds of secret are recognised:

- **known values**: the values of the environment variables a persona, a tool or Carrier itself
  uses as credentials (learnt at the edge, see :mod:`carrier.safety.known`, or added with
  :meth:`Redactor.add`), with their URL-encoded, JSON-escaped and base64 forms, so a model asked
  to "encode the key" still gives nothing away;
- **shapes**: credentials recognisable by their form wherever they come from (vendor keys, PEM
  blocks, tokens, credentials inside URLs), from :mod:`carrier.safety.patterns`.

Every redaction is reported as a :class:`RedactionEvent` (where, how many, which kinds; never the
value) to the redactor's listeners and the process-wide ones (:func:`on_redaction`): ``/metrics``
counts them, the audit log records them.

One redactor serves the whole process (:func:`current_redactor`): the commands configure it from
the environment (:func:`carrier.safety.known.configure_redactor`); tests install their own with
:func:`using_redactor`. Text that streams out uses :meth:`Redactor.stream`
(:mod:`carrier.safety.stream`), which holds back what could still become a secret.
"""

from __future__ import annotations

import base64
import contextlib
import html
import json
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

from carrier.safety.patterns import SECRET_PATTERNS, mask_urls, secret_query_name

if TYPE_CHECKING:
    from carrier.safety.stream import StreamRedactor

__all__ = [
    "COMMON_VALUES",
    "MARKER",
    "MIN_SECRET_LENGTH",
    "Listener",
    "Redacted",
    "RedactionEvent",
    "Redactor",
    "current_redactor",
    "on_redaction",
    "redact_text",
    "set_redactor",
    "shown",
    "using_redactor",
]

MARKER = "[redacted]"
"""What a secret becomes. Holds nothing of the value (not its length, not its first letters)."""

MIN_SECRET_LENGTH = 8
"""Known values shorter than this are not secrets worth replacing (``true``, ``8000``, ``dev``):
replacing them everywhere would mangle ordinary text and tell an attacker little."""

COMMON_VALUES = frozenset(
    {
        "anonymous",
        "changeme",
        "default",
        "disabled",
        "development",
        "enabled",
        "example",
        "localhost",
        "optional",
        "password",
        "production",
        "required",
        "undefined",
        "username",
    }
)
"""Values long enough but too common to replace wherever they appear (compared lowercased)."""

KNOWN = "known value"
"""The kind of a known-value redaction in :attr:`RedactionEvent.kinds`."""

_MASKED = ("***", "%2A%2A%2A")
"""How :func:`carrier.safety.patterns.mask_url` writes a credential it hid: nothing to redact."""

Span = tuple[int, int, frozenset[str]]
"""A region to replace: start, end, the kinds of secret found in it."""


@dataclass(frozen=True, slots=True)
class Redacted:
    """Text after redaction and how many secrets were replaced in it."""

    text: str
    count: int


@dataclass(frozen=True, slots=True)
class RedactionEvent:
    """Secrets were replaced in something leaving Carrier. Never holds a value."""

    where: str
    """Which exit: ``model``, ``tool``, ``api``, ``discord``, ``instagram``, ``log``, ``error``..."""
    count: int
    kinds: tuple[str, ...]
    """What was found (``known value``, ``openai key``, ``pem private key``...), sorted."""


Listener = Callable[[RedactionEvent], None]


class _Listeners:
    """Callables told about redactions. Bound methods are held weakly, so an object that
    subscribes (a ``Metrics`` of one app) does not live forever because it did."""

    def __init__(self) -> None:
        self._items: list[Callable[[], Listener | None]] = []
        self._lock = threading.Lock()

    def add(self, listener: Listener) -> Callable[[], None]:
        ref: Callable[[], Listener | None]
        if hasattr(listener, "__self__") and hasattr(listener, "__func__"):
            ref = weakref.WeakMethod(listener)
        else:

            def ref(listener: Listener = listener) -> Listener | None:
                return listener

        with self._lock:
            self._items.append(ref)

        def remove() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._items.remove(ref)

        return remove

    def emit(self, event: RedactionEvent) -> None:
        with self._lock:
            refs = list(self._items)
        dead = []
        for ref in refs:
            listener = ref()
            if listener is None:
                dead.append(ref)
                continue
            with contextlib.suppress(Exception):  # a listener never stops a redaction
                listener(event)
        if dead:
            with self._lock:
                self._items = [r for r in self._items if r not in dead]


_process_listeners = _Listeners()


def on_redaction(listener: Listener) -> Callable[[], None]:
    """Call ``listener`` for every redaction by any redactor in this process (``/metrics``, the
    audit log); returns a function that unsubscribes it."""
    return _process_listeners.add(listener)


def _forms(value: str) -> set[str]:
    """The value and the encodings a model could be asked for, or that text passes through on
    its way out: URL-encoded, JSON-escaped, XML-escaped (a reply is parsed out of XML), base64
    (standard and URL-safe, with and without padding)."""
    raw = value.encode()
    forms = {value, quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1]}
    forms |= {html.escape(value, quote=False), html.escape(value)}
    for encoded in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()):
        forms.add(encoded)
        forms.add(encoded.rstrip("="))
    return {f for f in forms if len(f) >= MIN_SECRET_LENGTH}


class Redactor:
    """Replaces known secret values and secret-shaped text with :data:`MARKER`.

    ``learns`` says whether the edge's learning helpers (:mod:`carrier.safety.known`) add the
    secrets of the environment and of each persona to it; :meth:`add` always adds. Safe to use
    from several threads (log records come from worker threads): the set of known values is
    swapped whole when it grows.
    """

    def __init__(self, values: Iterable[str | None] = (), *, learns: bool = True) -> None:
        self.learns = learns
        self._values: set[str] = set()
        self._forms: set[str] = set()
        self._known: re.Pattern[str] | None = None
        self._longest = 0
        self._lock = threading.Lock()
        self._listeners = _Listeners()
        for value in values:
            self.add(value)

    def __repr__(self) -> str:  # never the values
        return f"Redactor({len(self._values)} known values, learns={self.learns})"

    def __len__(self) -> int:
        """How many known values (not counting their encodings)."""
        return len(self._values)

    # -- what it knows --------------------------------------------------------------------
    def add(self, value: str | None) -> bool:
        """Know ``value`` as a secret from now on. Values shorter than
        :data:`MIN_SECRET_LENGTH` or too common (:data:`COMMON_VALUES`) are ignored; returns
        whether it was taken (False also when it was known already)."""
        return self.add_many([value]) == 1

    def add_many(self, values: Iterable[str | None]) -> int:
        """:meth:`add` for several values at once; returns how many were new."""
        fresh = set()
        for value in values:
            if not isinstance(value, str):
                continue
            value = value.strip()
            if len(value) >= MIN_SECRET_LENGTH and value.lower() not in COMMON_VALUES:
                fresh.add(value)
        with self._lock:
            fresh -= self._values
            if not fresh:
                return 0
            forms = set(self._forms)
            for value in fresh:
                forms |= _forms(value)
            ordered = sorted(forms, key=lambda f: (-len(f), f))  # longest first: no half matches
            self._known = re.compile("|".join(re.escape(f) for f in ordered))
            self._longest = len(ordered[0])
            self._forms = forms
            self._values |= fresh
        return len(fresh)

    def absorb(self, other: Redactor) -> int:
        """Take ``other``'s known values and listeners (when one redactor replaces another)."""
        with other._lock:
            values = set(other._values)
            listeners = list(other._listeners._items)
        with self._listeners._lock:
            self._listeners._items += [r for r in listeners if r not in self._listeners._items]
        return self.add_many(values)

    def add_url(self, url: str | None) -> int:
        """Know the credentials a URL carries: the password (and user) of its user info and the
        values of credential-named query parameters (``?api_key=``). Returns how many were
        taken."""
        if not url or "://" not in url:
            return 0
        try:
            parts = urlsplit(url.strip())
            password, user = parts.password, parts.username
        except ValueError:
            return 0
        values = [password, f"{user or ''}:{password}"] if password else []
        values += [
            value
            for name, value in parse_qsl(parts.query, keep_blank_values=True)
            if value and secret_query_name(name)
        ]
        return self.add_many(values)

    @property
    def longest(self) -> int:
        """The length of the longest known form: how much a stream must hold back."""
        return self._longest

    # -- finding ------------------------------------------------------------------------
    def spans(self, text: str) -> list[Span]:
        """Every region of ``text`` to replace, in order, overlapping finds merged."""
        found: list[tuple[int, int, str]] = []
        known = self._known
        if known is not None:
            found += [(m.start(), m.end(), KNOWN) for m in known.finditer(text)]
        for pattern in SECRET_PATTERNS:
            found += [
                (s, e, pattern.name)
                for s, e in pattern.spans(text)
                if text[s:e].rpartition(":")[2] not in _MASKED  # masked by ``mask_url``
            ]
        found = [f for f in found if f[0] < f[1]]
        if not found:
            return []
        found.sort()
        merged: list[Span] = []
        start, end, kinds = found[0][0], found[0][1], {found[0][2]}
        for s, e, kind in found[1:]:
            if s < end:
                end = max(end, e)
                kinds.add(kind)
            else:
                merged.append((start, end, frozenset(kinds)))
                start, end, kinds = s, e, {kind}
        merged.append((start, end, frozenset(kinds)))
        return merged

    def replace(self, text: str, spans: Iterable[Span], *, where: str | None) -> Redacted:
        """``text`` with ``spans`` (from :meth:`spans` of the same text) replaced; reports the
        redaction under ``where`` (None: not reported, e.g. text already counted)."""
        out: list[str] = []
        at = 0
        count = 0
        kinds: set[str] = set()
        for start, end, found in spans:
            out += [text[at:start], MARKER]
            at = end
            count += 1
            kinds |= found
        if not count:
            return Redacted(text, 0)
        out.append(text[at:])
        if where is not None:
            self.report(where, count, kinds)
        return Redacted("".join(out), count)

    def redact(self, text: str, *, where: str | None = "text") -> Redacted:
        """``text`` with every known value and secret shape replaced, and how many were."""
        if not text:
            return Redacted(text, 0)
        return self.replace(text, self.spans(text), where=where)

    def clean(self, text: str, *, where: str | None) -> str:
        """:meth:`redact`'s text only."""
        return self.redact(text, where=where).text

    def clean_head(self, text: str, limit: int, *, where: str | None) -> tuple[str, bool]:
        """The redacted start of ``text``, reading at most ``limit`` characters (large bodies
        that will be cut anyway), and whether it was cut. At a cut, whatever could be the start
        of a secret is left out too, so no half secret survives."""
        if len(text) <= limit:
            return self.clean(text, where=where), False
        return self.stream(where=where).feed(text[:limit]), True

    def scrub(self, value: Any, *, where: str | None) -> Any:
        """A copy of ``value`` (JSON-like: dicts, lists, strings) with every string redacted,
        keys included; reports one event for all of it."""
        count = 0
        kinds: set[str] = set()

        def walk(item: Any) -> Any:
            nonlocal count
            if isinstance(item, str):
                spans = self.spans(item)
                count += len(spans)
                for *_, found in spans:
                    kinds.update(found)
                return self.replace(item, spans, where=None).text
            if isinstance(item, Mapping):
                return {walk(k) if isinstance(k, str) else k: walk(v) for k, v in item.items()}
            if isinstance(item, list | tuple):
                return type(item)(walk(v) for v in item)
            return item

        out = walk(value)
        if count and where is not None:
            self.report(where, count, kinds)
        return out

    def stream(self, *, where: str | None) -> StreamRedactor:
        """A redactor for text that goes out piece by piece (see :mod:`carrier.safety.stream`)."""
        from carrier.safety.stream import StreamRedactor

        return StreamRedactor(self, where=where)

    # -- telling --------------------------------------------------------------------------
    def on_redaction(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` for this redactor's redactions; returns an unsubscribe function.
        (:func:`on_redaction` hears every redactor's.)"""
        return self._listeners.add(listener)

    def report(self, where: str, count: int, kinds: Iterable[str]) -> None:
        if count <= 0:
            return
        event = RedactionEvent(where=where, count=count, kinds=tuple(sorted(set(kinds))))
        self._listeners.emit(event)
        _process_listeners.emit(event)


_current = Redactor(learns=False)
"""Until the edge configures one: secret shapes only, and nothing learnt, so library use and
tests never gather values in a process-wide object."""


def current_redactor() -> Redactor:
    """The process-wide redactor, configured at the edge (``carrier run``, ``serve``, ``chat``)."""
    return _current


def set_redactor(redactor: Redactor) -> Redactor:
    """Make ``redactor`` the process-wide one; returns the one it replaces."""
    global _current
    previous, _current = _current, redactor
    return previous


@contextlib.contextmanager
def using_redactor(redactor: Redactor) -> Iterator[Redactor]:
    """``redactor`` as the process-wide one within the block (tests), then the previous again."""
    previous = set_redactor(redactor)
    try:
        yield redactor
    finally:
        set_redactor(previous)


def redact_text(text: str, *, where: str | None = "text") -> str:
    """``text`` through the process-wide redactor."""
    return _current.clean(text, where=where)


def shown(text: str | None, *, where: str | None = "api") -> str | None:
    """A setting or status as it may be shown (API fields, log lines): URLs with their
    credentials masked (``user:***@host``), then redacted. None stays None."""
    if text is None:
        return None
    return _current.clean(mask_urls(text), where=where)
