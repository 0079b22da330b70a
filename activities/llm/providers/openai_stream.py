"""The openai SDK's event stream, noting ``[DONE]``: apart from ``streams.py``, which imports no SDK
(a worker calling only Claude never loads ``openai``), and importable from there as before."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeVar

import openai

_T = TypeVar("_T")


class OpenAIEventStream(openai.AsyncStream[_T]):
    """The SDK's stream, noting whether ``[DONE]`` arrived (the SDK consumes it): without it a stream
    that stopped after its finish chunk was cut, not complete."""

    done = False

    async def _iter_events(self) -> AsyncIterator[Any]:
        async for sse in super()._iter_events():
            if sse.data.startswith("[DONE]"):
                self.done = True
            yield sse


__all__ = ["OpenAIEventStream"]
