"""A refusal is re-prompted at most once: the second refusal in a row for the
same call goes down the ladder (next model, default, typed failure).

Real dev server, real HTTP to the scripted model. The last test replays a
history recorded before the change, which re-prompted the second refusal: the
``workflow.patched`` gate keeps it replaying as it ran. (Recorded once with
the pre-change ladder: ``reprompt_budget=2``, a default result, a model that
always refuses: three ``llm.call`` activities, then the default.)
"""

from __future__ import annotations

import json
from pathlib import Path

from agent_support import FALLBACK_MODEL, MODEL, make_spec, run_agent, run_agent_failure
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from agentsteps.contracts import DefaultResult, LLMConfig
from agentsteps.workflows.agent import AgentWorkflow

REFUSAL = {"refusal": "I can't help with that."}
HISTORY = Path(__file__).parents[1] / "histories" / "refusal_reprompted_twice.json"


def _fallback() -> list[LLMConfig]:
    return [LLMConfig(model=FALLBACK_MODEL, max_tokens=256, context_window=16_000)]


async def test_second_refusal_in_a_row_goes_to_the_next_model_not_another_reprompt(engine, scripted):
    scripted.set_script(
        {
            "rules": [
                {"match": {"model": FALLBACK_MODEL}, "reply": {"content": "Paris is sunny."}},
                {"match": {"model": MODEL}, "reply": REFUSAL},
            ]
        }
    )
    spec = make_spec(reprompt_budget=3, fallback_models=_fallback())
    result = await run_agent(engine.client, engine.task_queue, spec)

    assert result.status == "completed" and result.output == "Paris is sunny."
    # One try and one re-prompt on the primary, though the budget allowed three re-prompts.
    assert [r.body["model"] for r in scripted.requests] == [MODEL, MODEL, FALLBACK_MODEL]
    assert [v.kind.value for v in result.violations] == ["refusal", "refusal"]
    assert "I can't help with that." in result.violations[0].message
    [degradation] = result.degradations
    assert (degradation.from_model, degradation.to, degradation.reason.kind.value) == (MODEL, FALLBACK_MODEL, "refusal")


async def test_two_refusals_with_no_model_left_end_on_the_default(engine, scripted):
    scripted.set_script({"default": REFUSAL})
    spec = make_spec(reprompt_budget=3, default_result=DefaultResult(value="no answer"))
    result = await run_agent(engine.client, engine.task_queue, spec)

    assert result.status == "completed_with_default" and result.output == "no answer"
    assert len(scripted.requests) == 2


async def test_two_refusals_and_nothing_declared_fail_typed(engine, scripted):
    scripted.set_script({"default": REFUSAL})
    error = await run_agent_failure(engine.client, engine.task_queue, make_spec(reprompt_budget=3))

    assert error.type == "ContractViolationError" and error.details[0]["kind"] == "refusal"
    assert len(scripted.requests) == 2


async def test_a_refusal_after_an_accepted_answer_starts_a_new_streak(engine, scripted):
    # refuse, then call a tool (accepted), then refuse again: each refusal gets its one re-prompt.
    scripted.set_script(
        {
            "replies": [
                REFUSAL,
                {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
                REFUSAL,
                {"content": "Paris is sunny."},
            ]
        }
    )
    spec = make_spec(reprompt_budget=3, default_result=DefaultResult(value="no answer"))
    result = await run_agent(engine.client, engine.task_queue, spec)

    assert result.status == "completed" and result.output == "Paris is sunny.", [
        (s.kind, s.violations) for s in result.steps
    ]
    assert [s.kind for s in result.steps] == ["assistant", "tool_call", "assistant", "final"]
    assert not result.degradations


async def test_a_history_recorded_before_the_change_replays_its_second_reprompt():
    history = WorkflowHistory.from_json("refusal-before-patch", json.loads(HISTORY.read_text()))
    replayer = Replayer(workflows=[AgentWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None
