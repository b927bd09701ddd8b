"""A registered tool as an action the model can call, with the rules a call passes first.

When the model calls a tool, the call goes through, in order:

1. **who**: the tool's ``trigger`` against the person the turn answers (refused: the model is
   told "not allowed for this person");
2. **arguments**: the tool's JSON schema (an invalid call costs the person nothing);
3. **how often**: ``calls_per_hour`` per person and tool (refused: the model is told when the
   person may try again);
4. **approval**: a tool with ``approval: required`` is parked for a human
   (:func:`carrier.tools.approvals.park`); the model is told it waits, and a neutral line saying
   so is added to the reply, so the person knows whatever the model makes of it;
5. **the call** (:func:`carrier.tools.call.call_tool`): the operator's rules for headers and
   addresses, then the request.

Each outcome is one ``tool.call`` audit event (:mod:`carrier.tools.records`). A failure is shown
to the model redacted (the endpoint's body cut to 300 characters); the log gets the reason only.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from carrier.jobs.base import JobStore
from carrier.plugins import Action, ActionResult, Plugin
from carrier.safety.known import learn_value
from carrier.safety.redact import current_redactor
from carrier.tools.approvals import park
from carrier.tools.call import ToolCallError, call_tool, check_arguments
from carrier.tools.policy import ToolPolicy
from carrier.tools.records import record_call
from carrier.tools.rules import CallLimiter, Sender, refusal_for
from carrier.tools.spec import ToolSpec

__all__ = ["tool_action", "tools_plugin"]

log = logging.getLogger(__name__)


def _refused(spec: ToolSpec, error: str) -> ActionResult:
    return ActionResult(
        action=spec.name.upper(), ok=False, error=error, data={"output": f"error: {error}"}
    )


def _call_key(call: Mapping[str, Any], arguments: Mapping[str, Any]) -> str:
    """A call's id within its turn: the model's id and what it asked for."""
    digest = hashlib.sha256(
        json.dumps(arguments, sort_keys=True, default=str).encode("utf-8")
    ).hexdigest()[:16]
    return f"{call.get('id') or ''}:{digest}"


def tool_action(
    spec: ToolSpec,
    *,
    environ: Mapping[str, str],
    policy: ToolPolicy | None = None,
    limiter: CallLimiter | None = None,
) -> Action:
    """An action that runs the tool with the arguments of the model's tool call, once the call
    passed the rules above. The redactor learns the values of its header secrets."""
    rules = policy if policy is not None else ToolPolicy()
    counts = limiter if limiter is not None else CallLimiter()
    for ref in spec.header_refs():
        learn_value(ref.resolve(environ))

    async def handler(turn: Any) -> ActionResult:
        call = turn.current_tool_call or {}
        raw = call.get("arguments")
        arguments: dict[str, Any] = dict(raw) if isinstance(raw, Mapping) else {}
        sender = Sender.of(turn.message)
        runtime = turn.runtime
        services = runtime.services
        agent_id = runtime.agent_id

        async def record(status: str, error: str | None = None, job_id: str | None = None) -> None:
            await record_call(
                services, tool=spec.name, agent_id=agent_id, sender=sender, status=status,
                arguments=arguments, error=error, job_id=job_id,
            )  # fmt: skip

        refusal = refusal_for(spec, sender)
        if refusal is not None:
            await record("not_allowed", refusal)
            return _refused(spec, refusal)
        try:
            check_arguments(spec, arguments)
        except ToolCallError as exc:
            await record("invalid", exc.reason)
            return _refused(spec, current_redactor().clean(str(exc), where="tool"))
        limit = spec.calls_per_hour or rules.calls_per_hour
        wait = counts.take(agent_id, spec.name, sender.key, limit=limit)
        if wait is not None:
            error = (
                f"tool {spec.name}: limit reached for this person ({limit} calls an hour); "
                f"they may use it again in about {max(1, round(wait / 60))} minutes"
            )
            await record("limited", error)
            return _refused(spec, error)
        if spec.approval == "required":
            return await _park(turn, spec, arguments, sender, call, record)
        try:
            output = await call_tool(spec, arguments, environ=environ, policy=rules)
        except ToolCallError as exc:
            error = current_redactor().clean(str(exc), where="tool")
            log.info("%s", exc.reason)  # never the endpoint's body
            await record("failed", exc.reason)
            return _refused(spec, error)
        await record("ran")
        return ActionResult(action=spec.name.upper(), data={"output": output})

    return Action(
        name=spec.name.upper(),
        description=spec.description,
        handler=handler,
        parameters=spec.parameters,
        tool_name=spec.name,
    )


async def _park(
    turn: Any,
    spec: ToolSpec,
    arguments: dict[str, Any],
    sender: Sender,
    call: Mapping[str, Any],
    record: Any,
) -> ActionResult:
    jobs = turn.runtime.services.get("jobs")
    if not isinstance(jobs, JobStore):
        error = (
            f"tool {spec.name}: needs a human's approval, but this host keeps no approval queue "
            "(approvals need the job store of `carrier run` or `carrier serve`)"
        )
        await record("no_approval_queue", error)
        return _refused(spec, error)
    message = turn.message
    room = {
        "id": turn.room.id if turn.room is not None else None,
        "platform": message.platform,
        "channel_id": message.channel.platform_id,
        "channel_name": message.channel.name,
    }
    job = await park(
        jobs,
        spec=spec,
        arguments=arguments,
        sender=sender,
        agent_id=turn.runtime.agent_id,
        room=room,
        inbound_id=turn.inbound.id if turn.inbound is not None else None,
        call_id=_call_key(call, arguments),
    )
    await record("awaiting_approval", None, job.id)
    output = (
        f"not run yet: a human must approve this call first (request {job.id}). Tell the person "
        "it is waiting for approval and that the result will be posted here once it is "
        "approved; do not say it is done."
    )
    notice = f"(Waiting for approval: {spec.name} for {sender.name}, request {job.id[:8]}.)"
    return ActionResult(
        action=spec.name.upper(),
        data={"output": output, "job_id": job.id},
        replies=[notice],
    )


def tools_plugin(
    specs: Sequence[ToolSpec],
    *,
    agent_id: str,
    environ: Mapping[str, str],
    policy: ToolPolicy | None = None,
    limiter: CallLimiter | None = None,
) -> Plugin:
    """The registered tools that apply to an agent, as one plugin (named ``tools``)."""
    counts = limiter if limiter is not None else CallLimiter()
    actions = [
        tool_action(s, environ=environ, policy=policy, limiter=counts)
        for s in specs
        if s.agent_ids is None or agent_id in s.agent_ids
    ]
    return Plugin(name="tools", actions=actions, description="HTTP tools registered over the API.")
