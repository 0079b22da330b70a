"""The ``AgentSteps*`` search attributes on the server: checked when a worker starts.

A client starting a run sets the first values with the start (``run_start_attributes``: part
of the start, no billable upsert); runs upsert changes (``workflows/visibility.py``), and a run
started without them upserts them itself. An upsert of an attribute the
namespace lacks fails the workflow task, again and again, so a worker must not
start polling without them. ``ensure_search_attributes``:

| the namespace                          | what happens                                      |
|----------------------------------------|---------------------------------------------------|
| has every attribute, with its type     | nothing                                           |
| lacks some, and lets us add them       | added (dev servers, a cluster with admin rights)  |
| lacks some, and refuses to add them    | ``DeploymentConfigError`` naming the commands     |
| has one with another type              | ``DeploymentConfigError``                         |
| cannot list them (time-skipping server)| added where it accepts them, else left as it is   |
| may not list them (restricted key)     | a warning naming the commands; the worker starts  |
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from ..contracts import AgentSpec
from ..contracts.errors import DeploymentConfigError
from ..contracts.names import (
    SA_AWAITING_APPROVAL,
    SA_COST,
    SA_LAST_ACTIVITY,
    SA_MODEL,
    SA_SPEC,
    SA_STEPS,
    SA_TENANT,
    SA_TOKENS,
    SA_VIOLATIONS,
    SEARCH_ATTRIBUTES,
)

_TYPES = {
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    "Double": IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
    "Bool": IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
    "Datetime": IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
}


def run_start_attributes(
    spec: AgentSpec, tenant: str | None = None, now: datetime | None = None
) -> TypedSearchAttributes:
    """What a run's start upsert would set (``Visibility.start``), for the client to set at the start instead.

    A run whose start carries them does not upsert them (one billable action less); the values and
    types are the workflow's own, so the console lists either run alike."""
    return TypedSearchAttributes(
        [
            *([SearchAttributePair(SearchAttributeKey.for_keyword(SA_TENANT), tenant)] if tenant else []),
            SearchAttributePair(SearchAttributeKey.for_keyword(SA_SPEC), spec.name[:200]),
            SearchAttributePair(SearchAttributeKey.for_keyword(SA_MODEL), spec.model.model[:200]),
            SearchAttributePair(SearchAttributeKey.for_int(SA_STEPS), 0),
            SearchAttributePair(SearchAttributeKey.for_int(SA_TOKENS), 0),
            SearchAttributePair(SearchAttributeKey.for_int(SA_VIOLATIONS), 0),
            SearchAttributePair(SearchAttributeKey.for_float(SA_COST), 0.0),
            SearchAttributePair(SearchAttributeKey.for_bool(SA_AWAITING_APPROVAL), False),
            SearchAttributePair(SearchAttributeKey.for_datetime(SA_LAST_ACTIVITY), now or datetime.now(timezone.utc)),
        ]
    )


def create_commands(namespace: str, names: dict[str, str] | None = None) -> list[str]:
    """The ``temporal`` CLI commands an operator runs once per namespace (docs/deployment.md)."""
    names = SEARCH_ATTRIBUTES if names is None else names
    return [
        f"temporal operator search-attribute create --namespace {namespace} --name {name} --type {kind}"
        for name, kind in names.items()
    ]


async def missing_search_attributes(client: Client, namespace: str) -> dict[str, str] | None:
    """The attributes the namespace lacks (name -> type); None when the server cannot list them."""
    try:
        listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    except RPCError as exc:
        if exc.status is RPCStatusCode.UNIMPLEMENTED:
            return None
        raise
    have = {**listed.system_attributes, **listed.custom_attributes}
    wrong = [
        f"{name} is {IndexedValueType.Name(have[name])}, not {kind}"
        for name, kind in SEARCH_ATTRIBUTES.items()
        if name in have and have[name] != _TYPES[kind]
    ]
    if wrong:
        raise DeploymentConfigError(
            f"namespace {namespace!r} has search attributes of the wrong type: {'; '.join(wrong)}. "
            "Runs could not upsert them; remove them (temporal operator search-attribute remove) and start "
            "the worker again."
        )
    return {name: kind for name, kind in SEARCH_ATTRIBUTES.items() if name not in have}


async def ensure_search_attributes(client: Client, namespace: str) -> None:
    """Before a worker polls: every ``AgentSteps*`` attribute exists, or a clear refusal to start."""
    try:
        missing = await missing_search_attributes(client, namespace)
    except RPCError as exc:
        if exc.status not in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNAUTHENTICATED):
            raise
        # Credentials that may run workflows but not read the namespace's schema: say what must exist.
        commands = "\n  ".join(create_commands(namespace))
        print(
            f"could not check the search attributes of namespace {namespace!r} ({exc.message}); runs fail their "
            f"workflow tasks unless these exist:\n  {commands}",
            file=sys.stderr,
        )
        return
    if missing == {}:
        return
    todo = SEARCH_ATTRIBUTES if missing is None else missing
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=namespace, search_attributes={name: _TYPES[kind] for name, kind in todo.items()}
            )
        )
    except RPCError as exc:
        if missing is None:
            return  # a server that can neither list nor add them (it accepts any upsert, or none)
        commands = "\n  ".join(create_commands(namespace, missing))
        raise DeploymentConfigError(
            f"namespace {namespace!r} lacks the search attributes the engine's runs keep up to date "
            f"({', '.join(missing)}), and this worker may not add them ({exc.message}). Runs would fail "
            f"their workflow tasks until they exist, so the worker does not start. Create them once:\n  {commands}"
        ) from None
    if missing:
        print(f"registered search attributes in namespace {namespace!r}: {', '.join(missing)}", file=sys.stderr)


__all__ = ["create_commands", "ensure_search_attributes", "missing_search_attributes", "run_start_attributes"]
