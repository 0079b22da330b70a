"""Tools answered from a recorded run: what a counterfactual replay's worker serves instead of real tools.

A ``ToolSource`` (``source.py``) holding, per replay run, its source run's
tool schemas and tool calls with their results. A call that matches a
recorded one (tool and canonical arguments, the same canonical JSON as effect
keys) gets the recorded result; any other call is refused, unexecuted, with a
result the model reads, and counted, unless ``allow_tools`` names it as a
read-only tool that may run live through ``live``. Nothing else is executed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from temporalio import activity

from ...contracts import ToolCallInput, ToolCallResult, ToolSchema
from ...contracts.llm.arguments import canonical_arguments
from .activities import ToolActivities

NOT_EXECUTED = "not_executed_in_replay"
"""The ``error_type`` of a call a replay refused: the recorded run never made it."""


@dataclass
class _Record:
    schemas: list[ToolSchema]
    calls: list[tuple[str, str, ToolCallResult]]


class RecordedTools:
    """A ``ToolSource`` answering each replay run's calls from its source run's record, never executing them.

    Which record applies is the calling activity's workflow id (each replay run
    has its own). ``live`` serves the ``allow_tools`` a call may run for real.
    """

    def __init__(self, live: ToolActivities | None = None, allow_tools: Sequence[str] = ()) -> None:
        self._runs: dict[str, _Record] = {}
        self._live = live
        self._allow = set(allow_tools)
        self.answered: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self.refused: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self.live_calls: dict[str, list[tuple[str, str]]] = defaultdict(list)

    def add(
        self, replay_id: str, schemas: Sequence[ToolSchema], calls: Sequence[tuple[str, str, ToolCallResult]]
    ) -> None:
        """``calls``: the source run's (tool, canonical arguments, result), answered to ``replay_id``'s calls."""
        self._runs[replay_id] = _Record(list(schemas), list(calls))

    async def describe(self, names: Sequence[str] | None = None) -> list[ToolSchema]:
        known: dict[str, ToolSchema] = {}
        for run in self._runs.values():
            for schema in run.schemas:
                known.setdefault(schema.name, schema)
        if self._live is not None:
            known.update({n: s for n, s in (await self._live.catalog()).items() if n in self._allow})
        return [known[n] for n in (names if names is not None else list(known)) if n in known]

    def known_owner(self, name: str) -> str | None:
        return None

    async def owners(self, names: Sequence[str]) -> dict[str, str]:
        """None: a replay's worker has an empty registry, so no name it answers is offered twice."""
        return {}

    async def call(self, call: ToolCallInput) -> ToolCallResult | None:
        # A replay's calls come from its workflows; an activity outside a workflow has no recorded run.
        replay_id = activity.info().workflow_id or ""
        source = self._runs.get(replay_id)
        arguments = canonical_arguments(call.arguments)
        if source is not None:
            for tool, args, answer in source.calls:
                if tool == call.name and args == arguments:
                    self.answered[replay_id].append((call.name, arguments))
                    return answer.model_copy(update={"call_id": call.call_id})
        if self._live is not None and call.name in self._allow:
            self.live_calls[replay_id].append((call.name, arguments))
            return await self._live.run(call)
        self.refused[replay_id].append((call.name, arguments))
        return ToolCallResult(
            call_id=call.call_id,
            name=call.name,
            is_error=True,
            error_type=NOT_EXECUTED,
            content=(
                "This is a replay of a recorded run: the recorded run made no such call, so it was not executed. "
                "Answer with what you have."
            ),
        )
