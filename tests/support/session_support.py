"""Builders shared by the session tests."""

from __future__ import annotations

import uuid
from typing import Any

from agent_support import make_spec
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from agentsteps.client.sessions import send_turn
from agentsteps.contracts.session import SessionConfig, TurnResult


def session_id() -> str:
    return f"session-{uuid.uuid4().hex[:10]}"


async def turn(engine: Any, sid: str, text: str, *, config: SessionConfig | None = None, **spec: Any) -> TurnResult:
    spec.setdefault("tools", ["get_weather"])
    return await send_turn(
        engine.client, make_spec(**spec), text, session_id=sid, task_queue=engine.task_queue, config=config
    )


def failure_of(exc: BaseException) -> ApplicationError:
    """The ApplicationError behind a failed or rejected update."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.__cause__
    assert isinstance(cause, ApplicationError), f"expected an ApplicationError behind {exc!r}"
    return cause


async def rejected(client: Client, sid: str, name: str, arg: Any) -> ApplicationError | RPCError:
    """Send update ``name`` and return why it was refused."""
    try:
        await client.get_workflow_handle(sid).execute_update(name, arg)
    except WorkflowUpdateFailedError as exc:
        return failure_of(exc)
    raise AssertionError(f"update {name} with {arg!r} was expected to be refused")


def memory_script() -> dict[str, Any]:
    """Turn 1 looks the weather up; turn 2 can only be answered from turn 1's messages."""
    return {
        "rules": [
            {"match": {"contains": "what did I ask", "any_contains": "Lisbon"}, "reply": {"content": "about Lisbon"}},
            {"match": {"contains": "what did I ask"}, "reply": {"content": "no memory"}},
            {
                "match": {"role": "user"},
                "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lisbon"}}]},
            },
            {"match": {"tool_result_for": "get_weather"}, "reply": {"content": "Lisbon is sunny"}},
        ]
    }
