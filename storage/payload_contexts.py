"""Where a sandboxed workflow's payload contexts are read: the workflow instance itself, not through the sandbox.

Temporal's converter asks the workflow instance, for every payload sequence it
encodes, decodes, stores or fetches (three times per payload each way), which
serialization context and which external-store context applies: the
workflow's, or the activity's that a command schedules. Under the sandbox each
question is a round trip into it (``exec`` of a freshly compiled snippet inside
the import guard), which py-spy put at about a fifth of an agent worker's
event-loop samples in the throughput shape (66 questions a run).

The answer is a pure read of the instance's own state (its info and its
pending commands), made by SDK code the sandbox passes through; no workflow
code runs in it. So it is asked of the instance inside the sandbox directly:
the same object answers, with the same state, only without the hop. An SDK
whose sandbox is laid out otherwise is asked the old way (``contexts_of``
returns the sandbox's own instance), so nothing changes but the cost.
"""

from __future__ import annotations

from typing import Any

from temporalio.worker import WorkflowInstance
from temporalio.worker._workflow_instance import _WorkflowInstanceImpl
from temporalio.worker.workflow_sandbox._runner import _Instance as _SandboxedInstance


def contexts_of(instance: WorkflowInstance) -> Any:
    """What to ask ``get_serialization_context`` and ``get_external_store_context`` of: the workflow instance
    inside ``instance``'s sandbox when the SDK's layout is the one this was written against, else ``instance``."""
    if not isinstance(instance, _SandboxedInstance):
        return instance
    in_sandbox = getattr(instance, "globals_and_locals", {}).get("__temporal_in_sandbox")
    inner = getattr(in_sandbox, "instance", None)
    return inner if isinstance(inner, _WorkflowInstanceImpl) else instance


__all__ = ["contexts_of"]
