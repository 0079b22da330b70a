"""A cap on the progress stream's long-poll Updates, so readers never consume what writers need.

``temporalio.contrib.workflow_streams`` serves each subscriber a long-poll
Update, and Temporal admits 10 Updates in flight per workflow: ten readers
would refuse every turn, approval and close. Readers of this release poll by
query through one feed per process (``client/session_stream.py``) and take no
Update at all; this keeps older readers (and anyone's own
``WorkflowStreamClient``) to a few, refused beyond that with
``StreamReadersFullError``. Only the validator changes, which replay never runs.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.contrib.workflow_streams._types import PollInput, PollResult

from ..contracts.errors import StreamReadersFullError
from ..failures import to_application_error

POLL_UPDATE = "__temporal_workflow_stream_poll"
"""The library's own name for its poll Update and query (not ours to rename)."""


class _PollCap:
    def __init__(self, stream: WorkflowStream, limit: int) -> None:
        self.stream, self.limit, self.in_flight = stream, limit, 0

    async def poll(self, payload: PollInput) -> PollResult:
        self.in_flight += 1
        try:
            return await self.stream._on_poll(payload)  # noqa: SLF001 - the library's own handler, unchanged
        finally:
            self.in_flight -= 1

    def validate(self, payload: PollInput) -> None:
        self.stream._validate_poll(payload)  # noqa: SLF001
        if self.in_flight >= self.limit:
            raise to_application_error(
                StreamReadersFullError(
                    f"{self.in_flight} stream readers already wait on this session by Update; follow it with "
                    "agentsteps.client.session_stream (one query poller per process) instead"
                )
            )


def guard_stream_polls(stream: WorkflowStream, limit: int) -> None:
    """Replaces the stream's poll Update handler with the same handler behind a cap of ``limit`` in flight."""
    cap = _PollCap(stream, limit)
    workflow.set_update_handler(POLL_UPDATE, cap.poll, validator=cap.validate)


__all__ = ["POLL_UPDATE", "guard_stream_polls"]
