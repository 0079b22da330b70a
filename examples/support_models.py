"""The wire types of the seed's three-step pipeline (examples/pipelines/support_reply.toml).

C1 reads a customer email and emits a ``TicketUpdate`` (the tool call), C2 is
the tool that applies it and returns the ticket's ``TicketState``, C3 writes
the ``SupportReply``. Pipeline files refer to them as
``"agentsteps.examples.support_models:TicketUpdate"``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

TicketStatus = Literal["open", "in_progress", "closed"]


class SupportEmail(BaseModel):
    sender: str = Field(min_length=1)
    subject: str = ""
    body: str = Field(min_length=1)


class TicketUpdate(BaseModel):
    # Forbidding extras is what lets the edge into the tool be proven: an
    # output that may carry any other key cannot be shown to fit a closed input.
    model_config = ConfigDict(extra="forbid")

    issue_id: str = Field(min_length=1, description='Ticket id from the email, e.g. "PROJ-123".')
    state: TicketStatus | None = None
    assignee: str | None = None
    comment: str = Field(min_length=1, max_length=2000, description="Internal note summarising the email.")


class TicketState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    issue_id: str
    state: TicketStatus
    assignee: str | None = None
    comment_count: int = Field(ge=0)


class SupportReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    issue_id: str
    state: TicketStatus
    message: str = Field(min_length=1, description="The reply to the customer; it names the ticket id.")
