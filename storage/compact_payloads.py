"""Activity payloads without the fields a reader fills in anyway: their defaults.

An activity's input and result are the engine's words to itself: the workflow
writes them and a worker reads them, or the other way round, never a caller.
Written whole, an agent step's four carried about 450 bytes of ``null``,
``false``, ``[]`` and default settings into history, a tenth of its bytes, which
the server stores, replicates and serves back on every replay. Read back, an
absent field is its default, so the value is equal field for field
(``default_factory`` fields are compared with a fresh default, so a timestamp
or an id is always written).

Only activity payloads: a workflow's input and result, its updates, queries and
signals are read by callers in any language, which see every field as before.
"""

from __future__ import annotations

from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter

JSON_PLAIN = b"json/plain"
"""The encoding it writes and, in a composite converter's table, the key it replaces."""


class CompactJSONPayloadConverter(PydanticJSONPlainPayloadConverter):
    """``json/plain`` without default values; decodes as the full converter does, with its type adapters."""

    def __init__(self, full: PydanticJSONPlainPayloadConverter) -> None:
        super().__init__()
        self._type_adapter = full._type_adapter  # one cache of type adapters per process, not one per converter

    def to_payload(self, value: Any) -> Payload | None:
        return Payload(
            metadata={"encoding": JSON_PLAIN}, data=self._schema_serializer.to_json(value, exclude_defaults=True)
        )


__all__ = ["JSON_PLAIN", "CompactJSONPayloadConverter"]
