"""The tracker's wire types: what its tools take and return (and so its output schemas)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

IssueState = Literal["open", "in_progress", "closed"]
STATES: tuple[str, ...] = ("open", "in_progress", "closed")


class Comment(BaseModel):
    id: int
    issue_id: str
    author: str
    body: str
    created_at: str
    """ISO 8601 UTC, second precision, e.g. ``2025-05-01T12:00:00Z``."""


class Issue(BaseModel):
    id: str = Field(description='Project key and number, e.g. "PROJ-123".')
    project: str
    title: str
    body: str
    state: IssueState
    assignee: str | None
    reporter: str
    labels: list[str]
    created_at: str
    updated_at: str
    """Bumped by every write, comments included, as real trackers do."""
    comment_count: int


class IssueDetail(Issue):
    comments: list[Comment]


class IssuePage(BaseModel):
    issues: list[Issue]
    next_cursor: str | None = Field(description="Pass back as `cursor` for the next page; null on the last page.")
