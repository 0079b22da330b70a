"""The payload store's traffic, told to whoever listens (storage/ records no metrics itself).

Each request a store makes is one ``(op, bytes)`` call to every listener in
``on_request``; the worker adds its ``agentsteps_payload_store_requests_total``
and ``agentsteps_payload_store_bytes_total`` counters there. Ops, as S3 bills
them: ``put`` (a new object written; its bytes), ``get`` (an object read; its
bytes), ``reference`` (a store of content already there: the S3 in-place copy
that marks it referenced, which answers 404 first for new content, or the
local file's touch), ``list`` (a page of a listing), ``head`` and ``delete``
(a batch of up to 1,000).
"""

from __future__ import annotations

from collections.abc import Callable

on_request: list[Callable[[str, int], None]] = []


def record(op: str, size: int = 0) -> None:
    for listener in on_request:
        listener(op, size)
