"""One HTTP tool call: arguments checked, headers resolved within the operator's rules, the
request sent through the egress guard, the answer read, redacted and cut.

Every way a call can go wrong ends as a :class:`ToolCallError` whose message is safe to show the
model: it names the tool and the reason, and, for an HTTP error, the start of the body
(:data:`MAX_ERROR_BODY` characters, redacted, with every header value sent blanked out). The
reason alone (:attr:`ToolCallError.reason`, no body) is what logs see.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from carrier import untrusted
from carrier.safety.egress import EgressRefused
from carrier.safety.redact import MARKER, current_redactor
from carrier.tools.policy import ToolPolicy
from carrier.tools.spec import ToolSpec

__all__ = [
    "MAX_ERROR_BODY",
    "MAX_OUTPUT_CHARS",
    "MAX_RESPONSE_BYTES",
    "ToolCallError",
    "call_tool",
    "check_arguments",
    "resolve_headers",
    "wrap_untrusted",
]

MAX_OUTPUT_CHARS = 8_000
"""Tool output longer than this is cut (and marked as cut) before it reaches the prompt."""
MAX_RESPONSE_BYTES = 1_000_000
MAX_ERROR_BODY = 300
"""How much of an error response's body the model sees (redacted); logs see none of it."""


class ToolCallError(Exception):
    """A tool call failed; the message is safe to show the model (no secrets). ``reason`` is
    the message without the endpoint's body, for logs."""

    def __init__(self, reason: str, *, body: str | None = None, sent: bool = False) -> None:
        self.reason = reason
        self.body = body
        self.sent = sent
        """Whether the request reached the endpoint (it may have acted)."""
        super().__init__(f"{reason}: {body}" if body else reason)


def wrap_untrusted(tool: str, output: str) -> str:
    """Tool output as it enters the prompt: fenced, escaped and marked as data, not instructions
    (see :func:`carrier.untrusted.wrap_untrusted`)."""
    return untrusted.wrap_untrusted(f"tool:{tool}", output)


def check_arguments(spec: ToolSpec, arguments: Mapping[str, Any]) -> None:
    """Raise :class:`ToolCallError` unless ``arguments`` fit the tool's JSON schema."""
    from jsonschema import Draft202012Validator

    errors = sorted(
        Draft202012Validator(spec.parameters).iter_errors(dict(arguments)),
        key=lambda e: list(e.path),
    )
    if errors:
        where = ".".join(str(p) for p in errors[0].path) or "arguments"
        raise ToolCallError(f"tool {spec.name}: invalid arguments at {where}: {errors[0].message}")


def resolve_headers(
    spec: ToolSpec, environ: Mapping[str, str], policy: ToolPolicy
) -> dict[str, str]:
    """The header values to send, each read from a variable the operator allows for the tool's
    host (checked again at every call: the rules or the spec may have changed since it was
    registered)."""
    headers = {}
    for ref in spec.header_refs():
        env = ref.env or ref.name
        problem = policy.env_problem(env, spec.host)
        if problem is not None:
            raise ToolCallError(f"tool {spec.name}: header {ref.name} not sent: {problem}")
        value = ref.resolve(environ)
        if not value:
            raise ToolCallError(
                f"tool {spec.name}: header {ref.name} needs the environment variable {env}, "
                "which is not set"
            )
        headers[ref.name] = value
    return headers


def _blank(text: str, values: Iterable[str]) -> str:
    """``text`` with every header value sent replaced (a service may echo the key it got, and the
    redactor may not have learned it if the environment changed)."""
    for value in values:
        if len(value) >= 4:
            text = text.replace(value, MARKER)
    return text


async def call_tool(
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    *,
    environ: Mapping[str, str],
    policy: ToolPolicy | None = None,
) -> str:
    """Validate the arguments, call the endpoint (no redirects, allowed hosts only, public
    addresses unless internal, size-capped) and return its output as text. Raises
    :class:`ToolCallError` with a reason safe to show."""
    policy = policy if policy is not None else ToolPolicy()
    check_arguments(spec, arguments)
    host = spec.host
    if host not in spec.allowed_hosts:
        raise ToolCallError(f"tool {spec.name}: host {host!r} is not allowed")
    problem = policy.address_problem(host)
    if problem is not None:
        raise ToolCallError(f"tool {spec.name}: not sent: {problem}")
    headers = resolve_headers(spec, environ, policy)
    query = (
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in arguments.items()}
        if spec.method == "GET"
        else None
    )
    body = dict(arguments) if spec.method != "GET" else None
    try:
        async with (
            httpx.AsyncClient(
                timeout=spec.timeout_s,
                follow_redirects=False,
                transport=policy.transport(),
                trust_env=False,
            ) as client,
            client.stream(
                spec.method, spec.url, params=query, json=body, headers=headers
            ) as response,
        ):
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > MAX_RESPONSE_BYTES:
                    break
                chunks.append(chunk)
            text = b"".join(chunks).decode(response.encoding or "utf-8", errors="replace")
            # Redacted before it is cut (no half secret slips past) and before the model, the
            # log or the store sees it: a service may echo the key it was sent.
            text = _blank(text, headers.values())
            text, cut = current_redactor().clean_head(text, 2 * MAX_OUTPUT_CHARS, where="tool")
    except EgressRefused as exc:
        raise ToolCallError(f"tool {spec.name}: not sent: {exc}") from None
    except httpx.TimeoutException:
        raise ToolCallError(
            f"tool {spec.name}: no answer within {spec.timeout_s:g} s", sent=True
        ) from None
    except httpx.HTTPError as exc:
        raise ToolCallError(f"tool {spec.name}: request failed ({type(exc).__name__})") from None
    if response.status_code >= 400:
        raise ToolCallError(
            f"tool {spec.name}: the endpoint answered HTTP {response.status_code}",
            body=_cut(text, MAX_ERROR_BODY),
            sent=True,
        )
    if 300 <= response.status_code < 400:
        raise ToolCallError(
            f"tool {spec.name}: the endpoint redirected (HTTP {response.status_code}); "
            "redirects are not followed",
            sent=True,
        )
    if cut or len(text) > MAX_OUTPUT_CHARS:
        text = text[:MAX_OUTPUT_CHARS] + "\n[output cut]"
    return text


def _cut(text: str, limit: int) -> str | None:
    """The start of an error body, on one line, at most ``limit`` characters (None if empty)."""
    text = " ".join(text.split())
    if not text:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
