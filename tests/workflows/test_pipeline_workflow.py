"""PipelineWorkflow end to end: real dev server, scripted model over HTTP, the Python ticket tool.

A violation is injected at each edge of the seed pipeline and the documented
handling is asserted: re-prompt, default result, or a typed failure naming
the edge.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx2
import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from agentsteps.activities.llm.activities import LLMActivities
from agentsteps.activities.tools.activities import ToolActivities
from agentsteps.client.pipeline_files import load_pipeline_file
from agentsteps.contracts import DefaultResult, LLMConfig
from agentsteps.contracts.composition.pipeline_run import PipelineInput, PipelineResult, pipeline_input
from agentsteps.contracts.names import PIPELINE_WORKFLOW
from agentsteps.examples.support_tools import build_registry
from agentsteps.workflows.pipeline import PipelineWorkflow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pipelines" / "support_reply.toml"
MODEL = "scripted-2026-01-01"
EMAIL = {"sender": "kim@example.com", "subject": "PROJ-1", "body": "Please close PROJ-1, it works now."}
UPDATE = {"issue_id": "PROJ-1", "state": "closed", "comment": "Customer confirms the fix."}
REPLY = {"issue_id": "PROJ-1", "state": "closed", "message": "Thanks! Ticket PROJ-1 is now closed."}


def example_input(**step_updates) -> PipelineInput:
    loaded = load_pipeline_file(EXAMPLE)
    inp = pipeline_input(loaded.spec, loaded.contracts, EMAIL)
    config = LLMConfig(model=MODEL, max_tokens=256, context_window=16_000)
    for step in inp.steps:
        if step.model is not None:
            step.model = config
        for key, value in step_updates.get(step.contract.name, {}).items():
            setattr(step, key, value)
    return inp


def rules(read_email: list[dict], reply: list[dict]) -> dict:
    """Replies per step, in order; the last one repeats."""
    out = []
    for marker, replies in (("triage customer emails", read_email), ("friendly reply", reply)):
        out += [{"match": {"any_contains": marker}, "reply": r, "times": 1} for r in replies[:-1]]
        out.append({"match": {"any_contains": marker}, "reply": replies[-1]})
    return {"rules": out}


@pytest.fixture
async def pipeline_worker(client, settings):
    async with httpx2.AsyncClient(timeout=5) as http:
        llm = LLMActivities(settings.providers, http)
        tools = ToolActivities(build_registry(settings), [])
        async with Worker(
            client,
            task_queue=settings.task_queue,
            workflows=[PipelineWorkflow],
            activities=[llm.call, tools.describe, tools.call],
        ):
            yield settings.task_queue


async def run(client, task_queue: str, inp: PipelineInput) -> PipelineResult:
    return await client.execute_workflow(
        PIPELINE_WORKFLOW, inp, id=f"pipe-{uuid.uuid4().hex[:10]}", task_queue=task_queue, result_type=PipelineResult
    )


async def failure(client, task_queue: str, inp: PipelineInput) -> ApplicationError:
    with pytest.raises(WorkflowFailureError) as info:
        await run(client, task_queue, inp)
    cause = info.value.cause
    assert isinstance(cause, ApplicationError), cause
    return cause


async def test_seed_pipeline_runs_three_steps_and_records_every_edge_check(client, pipeline_worker, scripted):
    scripted.set_script(rules([{"json": UPDATE}], [{"json": REPLY}]))
    result = await run(client, pipeline_worker, example_input())
    assert result.status == "completed"
    assert result.output == REPLY
    assert [s.name for s in result.steps] == ["read_email", "update_ticket", "reply"]
    assert result.steps[1].output == {"issue_id": "PROJ-1", "state": "closed", "assignee": None, "comment_count": 1}
    assert [e.edge for e in result.edges] == [
        "input->read_email",
        "read_email->update_ticket",
        "update_ticket->reply",
        "reply->output",
    ]
    assert all(e.ok for e in result.edges)
    assert "post read_email: has_field:issue_id" in result.edges[1].checks
    assert "post reply: mentions:message,issue_id" in result.edges[3].checks
    # The LLM step was asked for JSON in its output schema.
    assert scripted.requests[0].body["response_format"]["json_schema"]["schema"]["title"] == "TicketUpdate"


async def test_bad_json_at_the_first_edge_is_reprompted_then_accepted(client, pipeline_worker, scripted):
    scripted.set_script(rules([{"json": {"issue_id": "PROJ-1"}}, {"json": UPDATE}], [{"json": REPLY}]))
    result = await run(client, pipeline_worker, example_input())
    assert result.status == "completed"
    first_edge = [e for e in result.edges if e.edge == "read_email->update_ticket"]
    assert [e.ok for e in first_edge] == [False, True]
    assert first_edge[0].violations[0].kind.value == "response_schema_mismatch"
    assert result.steps[0].attempts == 2


async def test_a_tool_failure_at_the_second_edge_fails_typed_naming_the_edge(client, pipeline_worker, scripted):
    scripted.set_script(rules([{"json": {**UPDATE, "issue_id": "NOPE-9"}}], [{"json": REPLY}]))
    err = await failure(client, pipeline_worker, example_input())
    assert err.type == "ContractViolationError"
    assert "update_ticket->reply" in str(err)
    assert err.details[0]["kind"] == "tool_output_invalid"


async def test_a_post_predicate_failing_at_the_last_edge_degrades_to_the_default_result(
    client, pipeline_worker, scripted
):
    silent = {**REPLY, "message": "Thanks, all done."}  # does not name the ticket
    scripted.set_script(rules([{"json": UPDATE}], [{"json": silent}]))
    default = {"issue_id": "PROJ-1", "state": "closed", "message": "Your ticket PROJ-1 was updated."}
    inp = example_input(reply={"reprompt_budget": 1, "default_result": DefaultResult(value=default)})
    result = await run(client, pipeline_worker, inp)
    assert result.status == "completed_with_default"
    assert result.output == default
    last = [e for e in result.edges if e.edge == "reply->output"]
    assert [v.kind.value for e in last[:2] for v in e.violations] == ["predicate_failed", "predicate_failed"]
    assert last[-1].ok
    assert result.degradations[0].to == "default_result"


async def test_an_input_that_breaks_the_first_precondition_fails_before_any_call(client, pipeline_worker, scripted):
    inp = example_input()
    inp.input = {"sender": "kim@example.com"}
    err = await failure(client, pipeline_worker, inp)
    assert err.type == "ContractViolationError" and "input->read_email" in str(err)
    assert scripted.requests == []


async def test_a_refuted_composition_fails_the_run_before_any_step(client, pipeline_worker, scripted):
    inp = example_input()
    inp.steps[1].contract.input_schema = {"type": "object", "required": ["priority"]}
    err = await failure(client, pipeline_worker, inp)
    assert err.type == "CompositionError"
    assert err.details[0]["verdict"] == "refuted"
    assert scripted.requests == []
