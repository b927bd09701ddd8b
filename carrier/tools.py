"""HTTP tools: operator-registered endpoints the model can call through tool calling.

A :class:`ToolSpec` names an HTTP endpoint, its JSON-schema parameters, the hosts it may reach and
headers given as references to environment variables (never literal secrets). :func:`tool_action`
turns a spec into an :class:`~carrier.plugins.Action` with ``parameters``, so the generator offers
it to the model as a tool; the action manager runs the call and feeds the output back to the model
wrapped as untrusted data.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from carrier import untrusted
from carrier.character.secrets import LiteralSecretError, SecretRef, parse_secret_ref
from carrier.plugins import Action, ActionResult, Plugin
from carrier.safety.known import learn_value
from carrier.safety.redact import current_redactor

__all__ = [
    "MAX_OUTPUT_CHARS",
    "ToolCallError",
    "ToolSpec",
    "call_tool",
    "tool_action",
    "tools_plugin",
    "wrap_untrusted",
]

log = logging.getLogger(__name__)

MAX_OUTPUT_CHARS = 8_000
"""Tool output longer than this is cut (and marked as cut) before it reaches the prompt."""
MAX_RESPONSE_BYTES = 1_000_000

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


class ToolCallError(Exception):
    """A tool call failed; the message is safe to show the model (no secrets)."""


class ToolSpec(BaseModel):
    """An HTTP tool as registered by an operator."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Tool name the model calls, letters, digits, _ and -, max 64.")
    description: str = Field(min_length=1, max_length=1024)
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON schema (type object) of the arguments.",
    )
    url: str = Field(
        description="http(s) URL; GET sends the arguments as query parameters, other methods as a JSON body."
    )
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[str, str | dict[str, str]] = Field(
        default_factory=dict,
        description='Header values are environment references ("$NAME", "${NAME}" or {"env": "NAME"}).',
    )
    timeout_s: float = Field(default=10.0, gt=0, le=120)
    allowed_hosts: list[str] = Field(
        default_factory=list, description="Hosts the tool may reach; defaults to the URL's host."
    )
    agent_ids: list[str] | None = Field(
        default=None, description="Agents that get the tool; all when unset."
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                "must start with a letter and hold only letters, digits, _ and - (at most 64)"
            )
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an absolute http:// or https:// URL")
        return value

    @field_validator("parameters")
    @classmethod
    def _schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        if value.get("type") != "object":
            raise ValueError('must be a JSON schema with "type": "object"')
        try:
            Draft202012Validator.check_schema(value)
        except SchemaError as exc:
            raise ValueError(f"is not a valid JSON schema: {exc.message}") from None
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name, ref in value.items():
            try:
                parsed = parse_secret_ref(name, ref)
            except LiteralSecretError:
                parsed = SecretRef(name, None)
            if parsed.env is None:
                raise ValueError(
                    f"header {name!r} must reference an environment variable "
                    '("$NAME", "${NAME}" or {"env": "NAME"}), not hold a literal value'
                )
        return value

    @model_validator(mode="after")
    def _hosts(self) -> ToolSpec:
        host = urlsplit(self.url).hostname or ""
        if not self.allowed_hosts:
            self.allowed_hosts = [host]
        elif host not in self.allowed_hosts:
            raise ValueError(
                f"the URL's host {host!r} is not in allowed_hosts {self.allowed_hosts}"
            )
        return self

    def openai_tool(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def public(self) -> dict[str, Any]:
        """The spec as shown over the API: header references named, never resolved."""
        return self.model_dump(mode="json")


def wrap_untrusted(tool: str, output: str) -> str:
    """Tool output as it enters the prompt: fenced, escaped and marked as data, not instructions
    (see :func:`carrier.untrusted.wrap_untrusted`)."""
    return untrusted.wrap_untrusted(f"tool:{tool}", output)


def _resolve_headers(spec: ToolSpec, environ: Mapping[str, str]) -> dict[str, str]:
    headers = {}
    for name, raw in spec.headers.items():
        ref = parse_secret_ref(name, raw)  # validated when the spec was built
        value = ref.resolve(environ)
        if not value:
            raise ToolCallError(
                f"tool {spec.name}: header {name} needs the environment variable {ref.env}, which is not set"
            )
        headers[name] = value
    return headers


async def call_tool(
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    *,
    environ: Mapping[str, str],
    transport: httpx.AsyncBaseTransport | None = None,
) -> str:
    """Validate the arguments, call the endpoint (no redirects, allowed hosts only, size-capped)
    and return its output as text. Raises :class:`ToolCallError` with a reason safe to show."""
    from jsonschema import Draft202012Validator

    errors = sorted(
        Draft202012Validator(spec.parameters).iter_errors(dict(arguments)),
        key=lambda e: list(e.path),
    )
    if errors:
        where = ".".join(str(p) for p in errors[0].path) or "arguments"
        raise ToolCallError(f"tool {spec.name}: invalid arguments at {where}: {errors[0].message}")
    host = urlsplit(spec.url).hostname or ""
    if host not in spec.allowed_hosts:
        raise ToolCallError(f"tool {spec.name}: host {host!r} is not allowed")
    headers = _resolve_headers(spec, environ)
    query = (
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in arguments.items()}
        if spec.method == "GET"
        else None
    )
    body = dict(arguments) if spec.method != "GET" else None
    try:
        async with (
            httpx.AsyncClient(
                timeout=spec.timeout_s, follow_redirects=False, transport=transport
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
            text, cut = current_redactor().clean_head(text, 2 * MAX_OUTPUT_CHARS, where="tool")
    except httpx.TimeoutException:
        raise ToolCallError(f"tool {spec.name}: no answer within {spec.timeout_s:g} s") from None
    except httpx.HTTPError as exc:
        raise ToolCallError(f"tool {spec.name}: request failed ({type(exc).__name__})") from None
    if response.status_code >= 400:
        raise ToolCallError(
            f"tool {spec.name}: the endpoint answered HTTP {response.status_code}: {text[:300]}"
        )
    if 300 <= response.status_code < 400:
        raise ToolCallError(
            f"tool {spec.name}: the endpoint redirected (HTTP {response.status_code}); redirects are not followed"
        )
    if cut or len(text) > MAX_OUTPUT_CHARS:
        text = text[:MAX_OUTPUT_CHARS] + "\n[output cut]"
    return text


def tool_action(
    spec: ToolSpec, *, environ: Mapping[str, str], transport: httpx.AsyncBaseTransport | None = None
) -> Action:
    """An action that runs the tool with the arguments of the model's tool call. The redactor
    learns the values of its header secrets."""
    for name, raw in spec.headers.items():
        learn_value(parse_secret_ref(name, raw).resolve(environ))

    async def handler(turn: Any) -> ActionResult:
        call = turn.current_tool_call or {}
        try:
            output = await call_tool(
                spec, call.get("arguments") or {}, environ=environ, transport=transport
            )
        except ToolCallError as exc:
            error = current_redactor().clean(str(exc), where="tool")
            log.info("%s", error)
            return ActionResult(
                action=spec.name.upper(), ok=False, error=error, data={"output": f"error: {error}"}
            )
        return ActionResult(action=spec.name.upper(), data={"output": output})

    return Action(
        name=spec.name.upper(),
        description=spec.description,
        handler=handler,
        parameters=spec.parameters,
        tool_name=spec.name,
    )


def tools_plugin(
    specs: Sequence[ToolSpec],
    *,
    agent_id: str,
    environ: Mapping[str, str],
    transport: httpx.AsyncBaseTransport | None = None,
) -> Plugin:
    """The registered tools that apply to an agent, as one plugin (named ``tools``)."""
    actions = [
        tool_action(s, environ=environ, transport=transport)
        for s in specs
        if s.agent_ids is None or agent_id in s.agent_ids
    ]
    return Plugin(name="tools", actions=actions, description="HTTP tools registered over the API.")
