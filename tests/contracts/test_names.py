"""The persisted names, pinned: histories in flight and other-language backends depend on these strings.

The one place outside ``contracts/names.py`` that spells them, on purpose: a
rename must fail here and be made a deliberate, versioned change.
"""

from __future__ import annotations

import pytest

from agentsteps.contracts import names

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`


def test_every_persisted_name_is_unchanged():
    assert (names.AGENT_WORKFLOW, names.PIPELINE_WORKFLOW, names.MONITOR_WORKFLOW) == (
        "AgentWorkflow",
        "PipelineWorkflow",
        "StalledTicketMonitor",
    )
    assert names.ACTIVITIES == (
        "llm.call",
        "llm.call.resolving_tools",
        "llm.call.stored_results",
        "llm.call.tool_catalog",
        "llm.call.plan_first",
        "tools.describe",
        "tools.call",
        "code.check",
        "code.start",
        "code.resume",
        "code.fork",
        "session.fork",
        "monitor.record",
        "approval.notify",
        "approval.targets",
        "quota.plan",
    )
    assert (names.APPROVALS_QUERY, names.DECISIONS_QUERY) == ("approvals", "decisions")
    assert (names.FORK_SOURCE_QUERY, names.TURNS_QUERY) == ("fork_source", "turns")
    assert (names.STATE_QUERY, names.STEPS_QUERY, names.CANCEL_SIGNAL) == ("state", "steps", "cancel")
    # A patch id is in every history recorded after its change; renaming it replays those runs the old way.
    assert names.EFFECTS_PATCH == "agentsteps.effects-once.1"
    assert names.REFUSAL_REPROMPTED_ONCE == "refusal-reprompted-once"
    assert names.RELEASE_PATCH == "agentsteps.release.2026-12"


def test_the_worker_registers_every_workflow_by_its_persisted_name():
    from temporalio import workflow

    from agentsteps.worker import workflows

    assert {workflow._Definition.must_from_class(w).name for w in workflows()} == set(names.WORKFLOWS)
