"""What a secret looks like: credential formats that are recognisable by their shape, and
credentials written inside URLs.

Shared by the redactor (which replaces them in everything that leaves Carrier) and by the
character check (which refuses them in a character file). A shape match is a strong hint, not
proof: the patterns are anchored on vendors' fixed prefixes and long random tails, so ordinary
prose and identifiers do not match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = [
    "SECRET_PATTERNS",
    "SecretPattern",
    "find_secret_shapes",
    "looks_like_secret",
    "mask_url",
    "mask_urls",
    "secret_query_name",
    "url_credentials",
]


@dataclass(frozen=True, slots=True)
class SecretPattern:
    name: str
    """What kind of credential (``openai key``, ``pem private key``, ...): safe to print."""
    regex: re.Pattern[str]
    """Matches the credential; when it has a group named ``secret``, only that group is the
    credential (the rest is context, e.g. ``?api_key=``)."""

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the credentials are in ``text``."""
        group = "secret" if "secret" in self.regex.groupindex else 0
        return [m.span(group) for m in self.regex.finditer(text)]


def _p(name: str, pattern: str, flags: int = 0) -> SecretPattern:
    return SecretPattern(name, re.compile(pattern, flags))


# Word-ish boundaries: a token is not cut out of the middle of a longer identifier.
_B = r"(?<![A-Za-z0-9_-])"
_E = r"(?![A-Za-z0-9_-])"

_QUERY_NAMES = (
    "key",
    "apikey",
    "api_key",
    "api-key",
    "token",
    "access_token",
    "auth_token",
    "refresh_token",
    "secret",
    "client_secret",
    "password",
    "passwd",
    "pwd",
    "sig",
    "signature",
)
"""Query parameters whose value is a credential wherever it is written (``?api_key=...``)."""

SECRET_PATTERNS: tuple[SecretPattern, ...] = (
    _p(
        "pem private key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)",
        re.DOTALL,
    ),
    _p("anthropic key", _B + r"sk-ant-[A-Za-z0-9_-]{20,}" + _E),
    _p("openai key", _B + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}" + _E),
    _p("stripe key", _B + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}" + _E),
    _p("aws access key id", _B + r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}" + _E),
    _p("github token", _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})" + _E),
    _p("slack token", _B + r"xox[abposr]-[A-Za-z0-9-]{10,}" + _E),
    _p("google api key", _B + r"AIza[0-9A-Za-z_-]{35}" + _E),
    _p("hugging face token", _B + r"hf_[A-Za-z0-9]{30,}" + _E),
    _p("groq key", _B + r"gsk_[A-Za-z0-9]{40,}" + _E),
    _p("xai key", _B + r"xai-[A-Za-z0-9]{40,}" + _E),
    _p("meta access token", _B + r"(?:EAA[A-Za-z0-9]{30,}|IGQV[A-Za-z0-9_-]{30,})" + _E),
    _p(
        "discord bot token",
        _B + r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}" + _E,
    ),
    _p(
        "discord webhook",
        # The subdomain is bounded: an unbounded [a-z]+ rescans a long run of letters from every
        # position (quadratic time on text that only has to leave Carrier).
        r"(?:https?://)?(?:[a-z]{1,32}\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}",
    ),
    _p(
        "json web token", _B + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}" + _E
    ),
    _p("carrier api token", _B + r"crr_[A-Za-z0-9_-]{40,}" + _E),
    _p(
        "url credentials",
        r"(?<=://)[^\s/?#@:]+:[^\s/?#@]+(?=@)",
    ),
    _p(
        "url query credential",
        r"[?&](?:" + "|".join(re.escape(name) for name in _QUERY_NAMES) + r")="
        r"(?P<secret>[^&\s#\"'<>]{8,})",
        re.IGNORECASE,
    ),
    _p(
        "bearer token",
        r"(?<=\b[Bb]earer )(?=[A-Za-z._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{20,}",
    ),
)
"""Ordered so that a more specific shape is tried before a general one (``sk-ant-`` before
``sk-``)."""

_SECRET_QUERY = re.compile(
    r"(?:^|[_-])(?:key|apikey|api_key|token|access_token|secret|password|passwd|pass|pwd|sig|"
    r"signature|auth|credential|credentials|client_secret)$",
    re.IGNORECASE,
)


def find_secret_shapes(text: str) -> list[tuple[int, int, str]]:
    """Every span of ``text`` shaped like a credential, as (start, end, kind), in text order and
    without overlaps (the first pattern to claim a span keeps it)."""
    spans: list[tuple[int, int, str]] = []
    for pattern in SECRET_PATTERNS:
        for start, end in pattern.spans(text):
            if start == end or any(s < end and start < e for s, e, _ in spans):
                continue
            spans.append((start, end, pattern.name))
    spans.sort()
    return spans


def looks_like_secret(value: str) -> str | None:
    """The kind of credential ``value`` holds somewhere (see :data:`SECRET_PATTERNS`), or a URL
    with credentials; None when nothing in it looks secret."""
    found = find_secret_shapes(value)
    if found:
        return found[0][2]
    return "url with credentials" if url_credentials(value) else None


def secret_query_name(name: str) -> bool:
    """Whether a URL query parameter named ``name`` carries a credential (``key``, ``api_key``,
    ``access_token``, ``sig``, ...)."""
    return bool(_SECRET_QUERY.search(name))


def url_credentials(value: str) -> bool:
    """Whether ``value`` is a URL that carries credentials: a password in its user info, or a
    query parameter named like a credential with a value."""
    parts = _split(value)
    if parts is None:
        return False
    if parts.password:
        return True
    return any(
        v and secret_query_name(k) for k, v in parse_qsl(parts.query, keep_blank_values=True)
    )


def mask_url(value: str) -> str:
    """``value`` with the credentials a URL carries replaced by ``***`` (the password of its user
    info and credential-named query values), so it can be shown, logged or returned. Text that
    is not a URL comes back unchanged."""
    parts = _split(value)
    if parts is None:
        return value
    netloc = parts.netloc
    if parts.password:
        user = parts.username or ""
        host = netloc.rpartition("@")[2]
        netloc = f"{user}:***@{host}"
    query = parts.query
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(v and secret_query_name(k) for k, v in pairs):
        query = urlencode([(k, "***" if v and secret_query_name(k) else v) for k, v in pairs])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")


def mask_urls(text: str) -> str:
    """``text`` with :func:`mask_url` applied to every URL in it (a log line or a status note
    that names an endpoint)."""
    return _URL.sub(lambda m: mask_url(m.group(0)), text) if "://" in text else text


def _split(value: str) -> SplitResult | None:
    text = value.strip()
    if "://" not in text or any(ch.isspace() for ch in text):
        return None
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        return None
    return parts if parts.scheme and parts.netloc else None
