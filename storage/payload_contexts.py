"""A workflow's payload contexts: read from the workflow instance, not through the sandbox, and each bound once.

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

With each answer the converter derives a copy of itself bound to the context
(``with_context``, then ``_with_store_context``): two dataclass copies, each
building a payload converter and a failure converter it throws away. An
activity's context is asked nine times (its input and summary encoded, stored
and referenced, its result decoded, fetched and dereferenced) and a
workflow's on every activation, with equal values each time, so
``ContextCachingDataConverter`` keeps the bound copies of recent contexts.
A bound copy is a pure function of the context's value (frozen dataclasses,
compared by value), so a copy made earlier converts exactly as a new one would.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from temporalio.converter import (
    ActivitySerializationContext,
    DataConverter,
    SerializationContext,
    StorageDriverStoreContext,
)
from temporalio.worker import WorkflowInstance

from .payload_unavailable import ActivityResultPayloadConverter

try:  # SDK internals: a temporalio 1.x that moves them is asked the SDK's own way (``contexts_of``)
    from temporalio.worker._workflow_instance import _WorkflowInstanceImpl
    from temporalio.worker.workflow_sandbox._runner import _Instance as _SandboxedInstance
except ImportError:  # pragma: no cover - the tested version has them
    _WorkflowInstanceImpl = _SandboxedInstance = None  # type: ignore[assignment, misc]


def contexts_of(instance: WorkflowInstance) -> Any:
    """What to ask ``get_serialization_context`` and ``get_external_store_context`` of: the workflow instance
    inside ``instance``'s sandbox when the SDK's layout is the one this was written against, else ``instance``."""
    if _SandboxedInstance is None or _WorkflowInstanceImpl is None or not isinstance(instance, _SandboxedInstance):
        return instance
    in_sandbox = getattr(instance, "globals_and_locals", {}).get("__temporal_in_sandbox")
    inner = getattr(in_sandbox, "instance", None)
    return inner if isinstance(inner, _WorkflowInstanceImpl) else instance


BOUND_KEPT = 2048
"""Bound copies kept per converter: an activity's nine questions span the other runs' tasks in between
(two a run in flight, so 1,000 runs at once still find theirs); the oldest go first."""


@dataclasses.dataclass(frozen=True)
class ContextCachingDataConverter(DataConverter):
    """A ``DataConverter`` that keeps the copies of itself it binds to recent contexts (see the module)."""

    _bound: _Bound = dataclasses.field(init=False, repr=False, compare=False, default=None)  # type: ignore[assignment]
    _activity: bool = dataclasses.field(init=False, repr=False, compare=False, default=False)
    """Bound to an activity's context: what it derives for the store's context encodes activity results."""

    def __post_init__(self) -> None:
        super().__post_init__()
        # A bound copy is one of these too, with its own cache (of store contexts, mostly).
        object.__setattr__(self, "_bound", _Bound())

    def with_context(self, context: SerializationContext) -> Any:
        return self._bound.get(("context", context), lambda: self._bind(context))

    def _with_store_context(self, store_ctx: StorageDriverStoreContext) -> DataConverter:
        return self._bound.get(("store", store_ctx), lambda: self._bind_store(store_ctx))

    def _bind(self, context: SerializationContext) -> DataConverter:
        bound = super().with_context(context)
        if bound is not self and isinstance(context, ActivitySerializationContext):
            object.__setattr__(bound, "_activity", True)
        return bound

    def _bind_store(self, store_ctx: StorageDriverStoreContext) -> DataConverter:
        bound = super()._with_store_context(store_ctx)
        if self._activity and bound is not self:
            # The SDK's copy rebuilt the payload converter from its class, without the activity's context.
            bound = dataclasses.replace(bound, payload_converter_class=ActivityResultPayloadConverter)
        return bound


class _Bound:
    """A small LRU map; converters are bound from the event loop and from workflow threads alike."""

    def __init__(self) -> None:
        self._kept: OrderedDict[Any, DataConverter] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any, make: Callable[[], DataConverter]) -> DataConverter:
        try:
            hash(key)
        except TypeError:  # a context type that is not hashable: bound afresh, as the SDK does
            return make()
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
                return found
        made = make()
        with self._lock:
            self._kept[key] = made
            if len(self._kept) > BOUND_KEPT:
                self._kept.popitem(last=False)
        return made


def caching_contexts(converter: DataConverter, **changes: Any) -> ContextCachingDataConverter:
    """``converter`` with ``changes``, as a ``ContextCachingDataConverter``."""
    fields = {f.name: getattr(converter, f.name) for f in dataclasses.fields(converter) if f.init}
    return ContextCachingDataConverter(**{**fields, **changes})


__all__ = ["BOUND_KEPT", "ContextCachingDataConverter", "caching_contexts", "contexts_of"]
