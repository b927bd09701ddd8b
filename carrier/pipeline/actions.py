"""Stage 4, the action manager: validate and run the actions the model chose, then decide what
goes out (the model's text once, plus what actions add), passing each reply through the
before_outbound hooks."""

from __future__ import annotations

import logging

from carrier.pipeline.base import HookPoint, Turn, run_hooks
from carrier.plugins import ActionResult
from carrier.types import Content, MemoryStatus

__all__ = ["SILENT_ACTIONS", "ActionManager"]

log = logging.getLogger(__name__)

SILENT_ACTIONS = frozenset({"IGNORE"})
"""Actions that mean: send nothing."""


class ActionManager:
    """Runs chosen actions. An action that fails is logged and recorded; the turn goes on."""

    name = "actions"

    async def process(self, turn: Turn) -> None:
        rt = turn.runtime
        response = turn.response
        chosen = [a.strip().upper() for a in response.actions if a.strip()] or ["REPLY"]
        results: list[ActionResult] = []
        silent = False
        available = set(turn.state.actions) if turn.state is not None else set()
        for name in chosen:
            action = rt.registry.find_action(name)
            if action is None:
                results.append(ActionResult(action=name, ok=False, error="unknown action"))
                log.info("model chose unknown action %r; ignored", name)
                continue
            if action.name not in available:
                results.append(
                    ActionResult(action=action.name, ok=False, error="not available in this turn")
                )
                continue
            turn.current_action = action.name
            hook = await run_hooks(
                rt.registry.hooks_for(HookPoint.BEFORE_ACTION), HookPoint.BEFORE_ACTION, turn
            )
            if hook.action == "reject":
                results.append(
                    ActionResult(
                        action=action.name, ok=False, error=f"rejected by hook: {hook.reason}"
                    )
                )
                continue
            try:
                result = await action.handler(turn)
            except Exception as exc:
                log.exception("action %s failed", action.name)
                result = ActionResult(
                    action=action.name, ok=False, error=f"{type(exc).__name__}: {exc}"
                )
            results.append(result)
            silent = silent or action.name in SILENT_ACTIONS
        turn.current_action = None
        turn.action_results = results

        texts: list[str] = []
        if not silent and response.text.strip():
            texts.append(response.text)
        for result in results:
            texts += [t for t in result.replies if t.strip()]
        if silent:
            turn.final_status = MemoryStatus.IGNORED

        for text in texts:
            turn.outbound.append(Content(text=text, actions=[r.action for r in results if r.ok]))
        kept: list[Content] = []
        for content in turn.outbound:
            turn.trace.setdefault("outbound_candidates", []).append(content.text)
            turn.current_reply = content
            hook = await run_hooks(
                rt.registry.hooks_for(HookPoint.BEFORE_OUTBOUND), HookPoint.BEFORE_OUTBOUND, turn
            )
            if hook.action == "reject":
                log.info("reply dropped by hook: %s", hook.reason)
                continue
            if hook.action == "modify" and hook.text is not None:
                content.text = hook.text
            kept.append(content)
        turn.current_reply = None
        turn.outbound = kept
        turn.trace["actions"] = {
            "chosen": chosen,
            "results": [
                {"action": r.action, "ok": r.ok, "error": r.error, "data": r.data} for r in results
            ],
            "outbound": [c.text for c in kept],
        }
