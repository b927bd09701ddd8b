"""The first reply of a turn keeps a compact trace (the actions' outcomes and the stages'
timings) beside its thought and usage, so a turn can be read back later (the console's room
history) after the in-memory trace is gone."""

from __future__ import annotations

from carrier.llm.fake import FunctionModel
from carrier.runtime import AgentRuntime
from tests.pipeline.conftest import dm, xml


async def test_reply_trace_keeps_actions_and_stage_timings(make_runtime, store) -> None:
    model = FunctionModel(lambda r: xml("Ahoy!", actions="REPLY, NO_SUCH", thought="say hi"))
    runtime: AgentRuntime = make_runtime(model)
    await runtime.start()

    result = await runtime.handle(dm("hello there", msg_id="m1"))

    reply = await store.get_memory(result.replies[0].id)
    assert reply is not None
    trace = reply.content.metadata["trace"]
    assert trace["actions"] == [
        {"action": "REPLY", "ok": True, "error": None},
        {"action": "NO_SUCH", "ok": False, "error": "unknown action"},
    ]
    # Every stage before the evaluator, as the turn measured it.
    assert set(trace["timings_ms"]) == {"receive", "message", "state", "generate", "actions"}
    assert all(ms >= 0 for ms in trace["timings_ms"].values())
    assert reply.content.thought == "say hi"
