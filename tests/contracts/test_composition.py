"""compose(C1, C2, C3): derived contract, edge reports, acknowledgements, predicates."""

from __future__ import annotations

from typing import Optional

import jsonschema
import pytest
from pydantic import BaseModel, ConfigDict

from agentsteps.contracts.composition.contract import CompositionError, Contract, ContractKind, check_edges, compose
from agentsteps.contracts.composition.predicates import PREDICATES, predicate_violations, resolve_predicate
from agentsteps.contracts.composition.prover import Verdict
from agentsteps.contracts.errors import AgentStepsError, InvalidSpecError
from agentsteps.contracts.violations import ViolationKind

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`


class Email(BaseModel):
    sender: str
    body: str


class TicketUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ticket_id: int
    status: str
    assignee: Optional[str] = None


class TicketState(BaseModel):
    ticket_id: int
    status: str
    assignee: Optional[str] = None


class Reply(BaseModel):
    message: str
    ticket_id: int


def seed_pipeline() -> list[Contract]:
    return [
        Contract(
            name="read_email",
            kind=ContractKind.llm,
            input_schema=Email.model_json_schema(),
            output_schema=TicketUpdate.model_json_schema(),
            post=["has_field:status"],
        ),
        Contract(
            name="update_ticket",
            kind=ContractKind.tool,
            input_schema=TicketUpdate.model_json_schema(),
            output_schema=TicketState.model_json_schema(),
        ),
        Contract(
            name="reply",
            kind=ContractKind.llm_final,
            input_schema=TicketState.model_json_schema(),
            pre=["non_empty"],
            output_schema=Reply.model_json_schema(),
            post=["mentions:message,ticket_id"],
        ),
    ]


def test_seed_pipeline_composes_with_pre_of_the_first_and_post_of_the_last():
    steps = seed_pipeline()
    composed = compose(*steps, name="support_reply")
    assert composed.input_schema == steps[0].input_schema
    assert composed.pre == steps[0].pre
    assert composed.output_schema == steps[-1].output_schema
    assert composed.post == ["mentions:message,ticket_id"]
    assert [e.edge for e in composed.edges] == ["read_email->update_ticket", "update_ticket->reply"]
    assert all(e.verdict is Verdict.proven for e in composed.edges)


def test_predicates_are_listed_as_runtime_checks_never_as_proven():
    edges = compose(*seed_pipeline()).edges
    assert edges[0].runtime_checks == ["post read_email: has_field:status"]
    assert edges[1].runtime_checks == ["pre reply: non_empty"]


def test_refuted_edge_raises_composition_error_with_a_report_per_edge_and_a_checked_counterexample():
    steps = seed_pipeline()
    # The tool now needs a priority the LLM step never promises.
    steps[1] = steps[1].model_copy(
        update={
            "input_schema": {
                "type": "object",
                "properties": {"ticket_id": {"type": "integer"}, "priority": {"enum": ["low", "high"]}},
                "required": ["ticket_id", "priority"],
            }
        }
    )
    with pytest.raises(CompositionError) as info:
        compose(*steps)
    err = info.value
    assert isinstance(err, AgentStepsError)
    assert len(err.edges) == 2
    bad = err.failing
    assert [e.edge for e in bad] == ["read_email->update_ticket"]
    value = bad[0].counterexample.value
    assert jsonschema.Draft202012Validator(steps[0].output_schema).is_valid(value)
    assert not jsonschema.Draft202012Validator(steps[1].input_schema).is_valid(value)
    assert "read_email->update_ticket" in str(err)


def unproven_steps() -> list[Contract]:
    return [
        Contract(name="draft", kind=ContractKind.llm, output_schema={"type": "string", "pattern": "^T-[0-9]+$"}),
        Contract(name="lookup", kind=ContractKind.tool, input_schema={"type": "string", "pattern": "^T-[0-9]{1,6}$"}),
    ]


def test_unproven_edge_is_rejected_until_acknowledged():
    with pytest.raises(CompositionError) as info:
        compose(*unproven_steps())
    assert info.value.edges[0].verdict is Verdict.unproven
    assert "pattern" in info.value.edges[0].reason
    composed = compose(*unproven_steps(), acknowledged_unproven={"draft->lookup"})
    assert composed.edges[0].acknowledged and composed.edges[0].ok


def test_acknowledging_a_refuted_edge_does_not_let_it_through():
    steps = [
        Contract(name="a", kind=ContractKind.llm, output_schema={"type": "integer"}),
        Contract(name="b", kind=ContractKind.tool, input_schema={"type": "string"}),
    ]
    with pytest.raises(CompositionError):
        compose(*steps, acknowledged_unproven={"a->b"})


def test_acknowledging_an_edge_that_does_not_exist_is_a_spec_error_naming_the_field():
    with pytest.raises(InvalidSpecError) as info:
        compose(*unproven_steps(), acknowledged_unproven={"draft->lookupp"})
    assert info.value.violations[0].path == "$.acknowledge_unproven"


def test_duplicate_step_names_and_unknown_predicates_are_spec_errors():
    a = Contract(name="a", kind=ContractKind.llm)
    with pytest.raises(InvalidSpecError) as info:
        compose(a, a)
    assert info.value.violations[0].path == "$.steps[1].name"
    bad = Contract(name="b", kind=ContractKind.tool, pre=["no_such_check"])
    with pytest.raises(InvalidSpecError) as info:
        compose(a, bad)
    assert info.value.violations[0].path == "$.steps[1].pre[0]"
    with pytest.raises(InvalidSpecError):
        compose()


def test_an_invalid_step_schema_is_a_spec_error_naming_the_step():
    bad = Contract(name="b", kind=ContractKind.tool, input_schema={"type": "strnig"})
    with pytest.raises(InvalidSpecError) as info:
        check_edges([Contract(name="a", kind=ContractKind.llm), bad])
    assert info.value.violations[0].path.startswith("$.steps[1].input_schema")


def test_single_step_pipeline_has_no_edges():
    composed = compose(Contract(name="only", kind=ContractKind.code, output_schema={"type": "integer"}))
    assert composed.edges == [] and composed.output_schema == {"type": "integer"}


# --- predicates -------------------------------------------------------------------


def test_usage_consistent_checks_total_equals_prompt_plus_completion():
    check = PREDICATES["usage_consistent"]
    assert check({"usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}) is None
    assert "expected prompt_tokens + completion_tokens = 7" in check(
        {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 8}
    )


def test_mentions_predicate_checks_the_text_names_the_value():
    check = resolve_predicate("mentions:message,assignee")
    assert check({"message": "Assigned to Ada.", "assignee": "ada"}) is None
    assert "must mention" in check({"message": "Assigned.", "assignee": "Ada"})


def test_predicate_failures_become_violations_naming_the_contract():
    violations = predicate_violations(["non_empty", "has_field:x.y"], {"x": {}}, contract="reply", phase="pre")
    assert [v.kind for v in violations] == [ViolationKind.predicate_failed]
    assert violations[0].contract == "reply" and "has_field:x.y" in violations[0].message


def test_malformed_parametrised_predicate_is_a_spec_error():
    with pytest.raises(InvalidSpecError):
        resolve_predicate("mentions:only_one_path")
