"""One request's mapping between the engine's tool names and the API's.

Tools go out under ``api_tool_name`` and come back through this request's own
table (exact: ``tool_name_collisions`` refused any pair sharing a name at
start). Calls go out under the engine's ids (``call_ids``: unique in the
conversation), never the provider's: a model that numbers its calls ``call_0``
in every answer would otherwise send one id twice, which Anthropic rejects.
"""

from __future__ import annotations

from ....contracts.llm.request import LLMRequest
from ....contracts.tool_names import api_tool_name


class WireNames:
    def __init__(self, request: LLMRequest) -> None:
        self._from_api = {api_tool_name(t.name): t.name for t in request.tools}

    @staticmethod
    def tool(name: str) -> str:
        return api_tool_name(name)

    def engine_tool(self, api_name: str) -> str:
        """An answer's tool name as the engine knows it; a name no tool has stays as sent (a postcondition sees it)."""
        return self._from_api.get(api_name, api_name)


__all__ = ["WireNames"]
