"""A sandboxed run's payload contexts are read from its workflow instance directly and are the sandbox's own answers."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from agent_support import make_spec
from temporalio.client import Client
from temporalio.converter import ActivitySerializationContext, DataConverter, WorkflowSerializationContext
from temporalio.converter._extstore import StorageDriverStoreContext, StorageDriverWorkflowInfo
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker._workflow_instance import _WorkflowInstanceImpl
from temporalio.worker.workflow_sandbox._runner import _Instance as SandboxedInstance

from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.names import AGENT_WORKFLOW, TOOLS_CALL
from agentsteps.storage.payload_contexts import BOUND_KEPT, ContextCachingDataConverter, contexts_of
from agentsteps.storage.payload_unavailable import UNAVAILABLE_ENCODING
from agentsteps.worker import ENGINE_SANDBOX, RunAwareRunner, build_data_converter, running_worker


class _Comparing(WorkflowInstance):
    """The engine's instance, each context question also asked the old way: through the sandbox."""

    def __init__(self, engine: Any, answers: list[tuple[str, Any, Any]], shortcuts: list[Any]) -> None:
        self._engine, self._answers = engine, answers
        shortcuts.append(engine._contexts)

    def activate(self, act: Any) -> Any:
        return self._engine.activate(act)

    def get_info(self) -> Any:
        return self._engine.get_info()

    def get_serialization_context(self, command_info: Any) -> Any:
        fast = self._engine.get_serialization_context(command_info)
        self._answers.append(("serialization", fast, self._engine._inner.get_serialization_context(command_info)))
        return fast

    def get_external_store_context(self, command_info: Any) -> Any:
        fast = self._engine.get_external_store_context(command_info)
        self._answers.append(("store", fast, self._engine._inner.get_external_store_context(command_info)))
        return fast

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


class ComparingRunner(RunAwareRunner):
    def __init__(self) -> None:
        super().__init__(ENGINE_SANDBOX.inner)
        self.answers: list[tuple[str, Any, Any]] = []
        self.shortcuts: list[Any] = []

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _Comparing(super().create_instance(det), self.answers, self.shortcuts)


async def test_each_payload_context_of_an_agent_run_is_the_sandboxs_own_answer(client, settings, scripted):
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
                }
            ],
            "default": {"content": "done"},
        }
    )
    runner = ComparingRunner()
    # The worker's own converter (agentsteps worker connects with it): contexts bound once, kept.
    ours = await Client.connect(
        client.service_client.config.target_host,
        namespace=client.namespace,
        data_converter=build_data_converter(settings),
    )
    assert isinstance(ours.data_converter, ContextCachingDataConverter)
    async with running_worker(ours, settings, workflow_runner=runner, max_cached_workflows=0):
        result = await ours.execute_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=make_spec(), input="weather in Paris"),
            id=f"test-contexts-{uuid.uuid4().hex[:10]}",
            task_queue=settings.task_queue,
            result_type=AgentResult,
        )

    assert result.status == "completed" and len(result.steps) == 2
    # Every instance (one per workflow task: nothing cached) read its contexts without the sandbox.
    assert runner.shortcuts and all(isinstance(s, _WorkflowInstanceImpl) for s in runner.shortcuts)
    mismatched = [(kind, fast, slow) for kind, fast, slow in runner.answers if fast != slow]
    assert not mismatched, mismatched[:3]
    contexts = [fast for kind, fast, _ in runner.answers if kind == "serialization"]
    activities = {c.activity_type for c in contexts if isinstance(c, ActivitySerializationContext)}
    assert TOOLS_CALL in activities and any(a.startswith("llm.call") for a in activities), activities
    assert any(type(c) is WorkflowSerializationContext for c in contexts)
    assert any(kind == "store" and fast.target is not None for kind, fast, _ in runner.answers)


def test_an_instance_laid_out_otherwise_is_asked_as_before():
    other = object()
    assert contexts_of(other) is other  # type: ignore[arg-type]
    # A sandbox instance without the inner instance this was written against (another SDK's layout).
    bare = object.__new__(SandboxedInstance)
    bare.globals_and_locals = {"__file__": "workflow_sandbox.py"}
    assert contexts_of(bare) is bare
    bare.globals_and_locals["__temporal_in_sandbox"] = type("InSandbox", (), {"instance": object()})()
    assert contexts_of(bare) is bare


def _activity_context(n: int) -> ActivitySerializationContext:
    return ActivitySerializationContext(
        namespace="default",
        workflow_id="wf",
        workflow_type="AgentWorkflow",
        activity_type="tools.call",
        activity_id=str(n),
        activity_task_queue="q",
        is_local=False,
    )


def test_a_context_is_bound_once_and_converts_as_a_copy_bound_afresh(settings):
    ours = build_data_converter(settings)
    # The SDK's own binding of the same converter, for comparison.
    fresh = DataConverter(**{f.name: getattr(ours, f.name) for f in dataclasses.fields(ours) if f.init})
    context = _activity_context(1)
    bound = ours.with_context(context)
    assert ours.with_context(_activity_context(1)) is bound  # equal values: the kept copy
    assert ours.with_context(_activity_context(2)) is not bound
    value = {"city": "Paris", "n": [1, 2, 3]}
    assert bound.payload_converter.to_payloads([value]) == fresh.with_context(context).payload_converter.to_payloads(
        [value]
    )
    # The marker converter knows the run it converts for, as a fresh binding's does.
    marker = bound.payload_converter._inner_payload_converter.converters[UNAVAILABLE_ENCODING.encode()]
    assert marker._context == context

    store = StorageDriverStoreContext(
        target=StorageDriverWorkflowInfo(id="wf", run_id="r1", type="AgentWorkflow", namespace="default")
    )
    stored = bound._with_store_context(store)
    assert bound._with_store_context(dataclasses.replace(store)) is stored
    assert stored.external_storage._store_context == store
    other = StorageDriverStoreContext(target=dataclasses.replace(store.target, run_id="r2"))
    assert bound._with_store_context(other).external_storage._store_context == other


def test_the_kept_contexts_are_bounded_oldest_first(settings):
    ours = build_data_converter(settings)
    first = ours.with_context(_activity_context(0))
    for n in range(1, BOUND_KEPT + 1):
        ours.with_context(_activity_context(n))
    assert len(ours._bound._kept) == BOUND_KEPT
    assert ours.with_context(_activity_context(BOUND_KEPT)) is ours.with_context(_activity_context(BOUND_KEPT))
    assert ours.with_context(_activity_context(0)) is not first  # evicted, bound afresh
