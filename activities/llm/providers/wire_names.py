"""One request's mapping between the engine's tool names and call ids and the API's.

Tools go out under ``api_tool_name`` and come back through this request's own
table (exact: ``tool_name_collisions`` refused any pair sharing a name at
start). A call the engine renamed (``call_ids``) goes out under the id the
provider gave it, and so does every tool result answering it.
"""

from __future__ import annotations

from ....contracts.llm.call_ids import wire_call_ids
from ....contracts.llm.request import LLMRequest
from ....contracts.tool_names import api_tool_name


class WireNames:
    def __init__(self, request: LLMRequest) -> None:
        self._from_api = {api_tool_name(t.name): t.name for t in request.tools}
        self._call_ids = wire_call_ids(request.messages)

    @staticmethod
    def tool(name: str) -> str:
        return api_tool_name(name)

    def engine_tool(self, api_name: str) -> str:
        """An answer's tool name as the engine knows it; a name no tool has stays as sent (a postcondition catches it)."""
        return self._from_api.get(api_name, api_name)

    def call_id(self, engine_id: str) -> str:
        return self._call_ids.get(engine_id, engine_id)


__all__ = ["WireNames"]
