"""Stage 4, the action manager: run the tools the model called (feeding their output back to the
model), validate and run the actions it named, then decide what goes out (the model's text once,
plus what actions add), passing each reply through the before_outbound hooks."""

from __future__ import annotations

import json
import logging

from carrier.llm.base import ChatMessage
from carrier.pipeline.base import HookPoint, Turn, run_hooks
from carrier.plugins import Action, ActionResult
from carrier.types import Content, MemoryStatus
from carrier.untrusted import wrap_untrusted

__all__ = ["MAX_TOOL_ROUNDS", "SILENT_ACTIONS", "ActionManager"]

log = logging.getLogger(__name__)

SILENT_ACTIONS = frozenset({"IGNORE"})
"""Actions that mean: send nothing."""
MAX_TOOL_ROUNDS = 3
"""Tool-call rounds in one turn before the model must answer with what it has."""


class ActionManager:
    """Runs chosen actions. An action that fails is logged and recorded; the turn goes on."""

    name = "actions"

    async def process(self, turn: Turn) -> None:
        results: list[ActionResult] = []
        if turn.tool_calls:
            await self._run_tools(turn, results)
        silent = await self._run_named(turn, results)
        turn.action_results = results

        texts: list[str] = []
        if not silent and turn.response.text.strip():
            texts.append(turn.response.text)
        for result in results:
            texts += [t for t in result.replies if t.strip()]
        if silent:
            turn.final_status = MemoryStatus.IGNORED
        done = [r.action for r in results if r.ok]
        turn.outbound = [Content(text=text, actions=done) for text in texts]
        await self._outbound_hooks(turn)
        turn.trace["actions"] = {
            "chosen": [r.action for r in results],
            "results": [
                {"action": r.action, "ok": r.ok, "error": r.error, "data": r.data} for r in results
            ],
            "outbound": [c.text for c in turn.outbound],
        }

    async def _run_named(self, turn: Turn, results: list[ActionResult]) -> bool:
        """Run the actions named in the answer; True if one of them means "send nothing"."""
        rt = turn.runtime
        chosen = [a.strip().upper() for a in turn.response.actions if a.strip()] or ["REPLY"]
        available = set(turn.state.actions) if turn.state is not None else set()
        silent = False
        for name in chosen:
            action = rt.registry.find_action(name)
            if action is None:
                results.append(ActionResult(action=name, ok=False, error="unknown action"))
                log.info("model chose unknown action %r; ignored", name)
                continue
            if action.name not in available or action.parameters is not None:
                results.append(
                    ActionResult(action=action.name, ok=False, error="not available in this turn")
                )
                continue
            result = await self._guarded(action, turn)
            results.append(result)
            silent = silent or (result.ok and action.name in SILENT_ACTIONS)
        return silent

    async def _run_tools(self, turn: Turn, results: list[ActionResult]) -> None:
        """Run the model's tool calls, feed their outputs back (wrapped as untrusted data) and let
        the model answer with them, for a few rounds at most."""
        rt = turn.runtime
        available = set(turn.state.actions) if turn.state is not None else set()
        for _ in range(MAX_TOOL_ROUNDS):
            calls, turn.tool_calls = turn.tool_calls, []
            if not calls:
                break
            calls = [{**c, "id": c.get("id") or f"call_{i}"} for i, c in enumerate(calls)]
            messages = [
                ChatMessage(
                    role="assistant",
                    content=turn.response.text if turn.response is not None else "",
                    tool_calls=[
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {
                                "name": c.get("name"),
                                "arguments": json.dumps(c.get("arguments") or {}),
                            },
                        }
                        for c in calls
                    ],
                )
            ]
            for call in calls:
                name = str(call.get("name") or "")
                action = rt.registry.find_action(name)
                if action is None or action.parameters is None or action.name not in available:
                    result = ActionResult(
                        action=name.upper(), ok=False, error="no such tool in this turn"
                    )
                else:
                    turn.current_tool_call = call
                    result = await self._guarded(action, turn)
                    turn.current_tool_call = None
                results.append(result)
                output = str(result.data.get("output") or f"error: {result.error}")
                # Escaped and fenced: the output cannot close its <data> element or give orders.
                messages.append(
                    ChatMessage(
                        role="tool",
                        tool_call_id=call["id"],
                        content=wrap_untrusted(f"tool:{name}", output),
                    )
                )
            turn.tool_messages += messages
            turn.response, turn.tool_calls = await rt.generate_after_tools(turn)
        if turn.tool_calls:
            log.warning(
                "model still asked for tools after %d rounds; answering with what it has",
                MAX_TOOL_ROUNDS,
            )
            turn.tool_calls = []
        if turn.on_chunk is not None and turn.response.text:
            await turn.on_chunk(
                turn.response.text
            )  # the answer after tools is not streamed piecewise

    @staticmethod
    async def _guarded(action: Action, turn: Turn) -> ActionResult:
        """The before_action hooks, then the handler; a failure becomes a recorded result."""
        rt = turn.runtime
        turn.current_action = action.name
        try:
            hook = await run_hooks(
                rt.registry.hooks_for(HookPoint.BEFORE_ACTION), HookPoint.BEFORE_ACTION, turn
            )
            if hook.action == "reject":
                return ActionResult(
                    action=action.name, ok=False, error=f"rejected by hook: {hook.reason}"
                )
            return await action.handler(turn)
        except Exception as exc:
            log.exception("action %s failed", action.name)
            return ActionResult(action=action.name, ok=False, error=f"{type(exc).__name__}: {exc}")
        finally:
            turn.current_action = None

    @staticmethod
    async def _outbound_hooks(turn: Turn) -> None:
        rt = turn.runtime
        kept: list[Content] = []
        for content in turn.outbound:
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
