"""QueueRegistry: one per task queue, the queue's fingerprint and its workers' leases.

Its rule is ``contracts/queue_registry.py``'s ``decide``; the worker's side is ``client/queue_membership.py``.
It runs on its own task queue (``QUEUE_REGISTRY_TASK_QUEUE``), which every agentsteps worker process serves
before it polls its own: so the first worker of a queue can be answered, and a refused one has polled
nothing of the queue it asked for.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from ..contracts.names import QUEUE_JOIN_UPDATE, QUEUE_LEAVE_SIGNAL, QUEUE_REGISTRY_QUERY, QUEUE_REGISTRY_WORKFLOW
    from ..contracts.queue_registry import JoinAnswer, JoinRequest, LeaveRequest, RegistryState, decide
    from .entries import NO_INPUT, decoded, signal_input, update_input

_EVENTS_BEFORE_CONTINUE = 2_000


@workflow.defn(name=QUEUE_REGISTRY_WORKFLOW)
class QueueRegistryWorkflow:
    @workflow.init
    def __init__(self, raw: RawValue = NO_INPUT) -> None:
        state, self.malformed = decoded(raw, RegistryState, f"{QUEUE_REGISTRY_WORKFLOW} input")
        self.state = state or RegistryState()

    @workflow.run
    async def run(self, raw: RawValue = NO_INPUT) -> None:
        if self.malformed is not None:
            raise self.malformed
        await workflow.wait_condition(self._history_is_long)
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(self.state)

    def _history_is_long(self) -> bool:
        info = workflow.info()
        return info.is_continue_as_new_suggested() or info.get_current_history_length() > _EVENTS_BEFORE_CONTINUE

    @workflow.update(name=QUEUE_JOIN_UPDATE)
    def join(self, raw: RawValue) -> JoinAnswer:
        return decide(self.state, update_input(raw, JoinRequest, QUEUE_JOIN_UPDATE), workflow.now().timestamp())

    @join.validator
    def _check_join(self, raw: RawValue) -> None:
        update_input(raw, JoinRequest, QUEUE_JOIN_UPDATE)

    @workflow.signal(name=QUEUE_LEAVE_SIGNAL)
    def leave(self, raw: RawValue) -> None:
        request = signal_input(raw, LeaveRequest, QUEUE_LEAVE_SIGNAL)
        if request is not None:
            self.state.leases.pop(request.worker, None)

    @workflow.query(name=QUEUE_REGISTRY_QUERY)
    def view(self) -> RegistryState:
        return self.state


__all__ = ["QueueRegistryWorkflow"]
