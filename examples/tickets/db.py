"""SQLite storage for the ticket tracker.

WAL mode lets a stdio server and an HTTP server (or a test reading with SQL)
share one file. Every write runs in ``BEGIN IMMEDIATE`` so the idempotency
check and the write it guards are one atomic step, even across processes.

Timestamps are fixed-width ISO 8601 UTC strings (``2025-05-01T12:00:00Z``), so
SQL string comparison is time comparison.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .models import STATES, Comment, Issue, IssueDetail, IssuePage

SCHEMA = """
CREATE TABLE IF NOT EXISTS projects (
    key TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    lead TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS issues (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    number INTEGER NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL,
    assignee TEXT,
    reporter TEXT NOT NULL,
    labels TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (project, number)
);
CREATE INDEX IF NOT EXISTS issues_by_updated ON issues (updated_at, id);
CREATE INDEX IF NOT EXISTS issues_by_project ON issues (project, state, updated_at, id);
CREATE TABLE IF NOT EXISTS comments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    issue_id TEXT NOT NULL REFERENCES issues (id),
    author TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS comments_by_issue ON comments (issue_id, id);
CREATE TABLE IF NOT EXISTS idempotency (
    key TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    response TEXT NOT NULL,
    created_at TEXT NOT NULL
);
"""

MAX_PAGE = 200
MAX_KEY_LENGTH = 200


class TicketError(Exception):
    """A request the tracker refuses; the server turns it into an ``is_error`` result."""


class NotFoundError(TicketError):
    pass


class InvalidArgumentError(TicketError):
    pass


class IdempotencyConflictError(TicketError):
    """The key was already used for a different request."""


def format_ts(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_ts(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidArgumentError(f"not an ISO 8601 timestamp: {text!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment


def _utcnow() -> datetime:
    return datetime.now(UTC)


def connect(path: str | Path) -> sqlite3.Connection:
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)  # a fresh clone has no .agentsteps/ yet
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.executescript(SCHEMA)
    return conn


def _encode_cursor(updated_at: str, issue_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([updated_at, issue_id]).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        updated_at, issue_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(updated_at, str) or not isinstance(issue_id, str):
            raise ValueError
    except (ValueError, TypeError) as exc:
        raise InvalidArgumentError("cursor is not one this server issued") from exc
    return updated_at, issue_id


def _request_hash(tool: str, request: dict[str, Any]) -> str:
    canonical = json.dumps({"tool": tool, "request": request}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class TicketStore:
    """All tracker reads and writes. Calls are synchronous and short."""

    def __init__(self, path: str | Path, *, clock: Callable[[], datetime] = _utcnow) -> None:
        self.path = Path(path)
        self._clock = clock
        self._conn = connect(self.path)

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        else:
            self._conn.execute("COMMIT")

    # -- reads ---------------------------------------------------------------

    def _issue_from_row(self, row: sqlite3.Row) -> Issue:
        return Issue(
            id=row["id"],
            project=row["project"],
            title=row["title"],
            body=row["body"],
            state=row["state"],
            assignee=row["assignee"],
            reporter=row["reporter"],
            labels=json.loads(row["labels"]),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            comment_count=row["comment_count"],
        )

    _ISSUE_SELECT = (
        "SELECT i.*, (SELECT COUNT(*) FROM comments c WHERE c.issue_id = i.id) AS comment_count FROM issues i"
    )

    def list_issues(
        self,
        *,
        project: str | None = None,
        state: str | None = None,
        assignee: str | None = None,
        updated_before: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> IssuePage:
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidArgumentError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
        if state is not None and state not in STATES:
            raise InvalidArgumentError(f"state must be one of {list(STATES)}, got {state!r}")
        where: list[str] = []
        params: list[Any] = []
        if project is not None:
            where.append("i.project = ?")
            params.append(project)
        if state is not None:
            where.append("i.state = ?")
            params.append(state)
        if assignee is not None:
            where.append("i.assignee = ?")
            params.append(assignee)
        if updated_before is not None:
            where.append("i.updated_at < ?")
            params.append(format_ts(parse_ts(updated_before)))
        if cursor is not None:
            after_ts, after_id = _decode_cursor(cursor)
            where.append("(i.updated_at, i.id) > (?, ?)")
            params.extend([after_ts, after_id])
        sql = self._ISSUE_SELECT
        if where:
            sql += " WHERE " + " AND ".join(where)
        # Oldest-updated first: the order a stall hunt wants, and a stable keyset for cursors.
        sql += " ORDER BY i.updated_at, i.id LIMIT ?"
        params.append(limit + 1)
        rows = self._conn.execute(sql, params).fetchall()
        issues = [self._issue_from_row(r) for r in rows[:limit]]
        next_cursor = _encode_cursor(issues[-1].updated_at, issues[-1].id) if len(rows) > limit else None
        return IssuePage(issues=issues, next_cursor=next_cursor)

    def get_issue(self, issue_id: str) -> IssueDetail:
        row = self._conn.execute(self._ISSUE_SELECT + " WHERE i.id = ?", (issue_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no issue {issue_id!r}")
        comments = [
            Comment(**dict(c))
            for c in self._conn.execute(
                "SELECT id, issue_id, author, body, created_at FROM comments WHERE issue_id = ? ORDER BY id",
                (issue_id,),
            )
        ]
        return IssueDetail(**self._issue_from_row(row).model_dump(), comments=comments)

    def project_lead(self, project: str) -> str | None:
        row = self._conn.execute("SELECT lead FROM projects WHERE key = ?", (project,)).fetchone()
        return None if row is None else row["lead"]

    # -- idempotent writes ---------------------------------------------------

    def _idempotent(
        self, tool: str, key: str, request: dict[str, Any], write: Callable[[sqlite3.Connection, str], dict[str, Any]]
    ) -> dict[str, Any]:
        if not key or len(key) > MAX_KEY_LENGTH:
            raise InvalidArgumentError(f"idempotency_key must be 1 to {MAX_KEY_LENGTH} characters")
        digest = _request_hash(tool, request)
        with self._write() as conn:
            row = conn.execute("SELECT tool, request_hash, response FROM idempotency WHERE key = ?", (key,)).fetchone()
            if row is not None:
                if row["tool"] != tool or row["request_hash"] != digest:
                    raise IdempotencyConflictError(
                        f"idempotency_key {key!r} was already used for a different {row['tool']} request"
                    )
                stored: dict[str, Any] = json.loads(row["response"])
                return stored
            now = format_ts(self._clock())
            response = write(conn, now)
            conn.execute(
                "INSERT INTO idempotency (key, tool, request_hash, response, created_at) VALUES (?, ?, ?, ?, ?)",
                (key, tool, digest, json.dumps(response), now),
            )
            return response

    def _require_issue(self, conn: sqlite3.Connection, issue_id: str) -> sqlite3.Row:
        row: sqlite3.Row | None = conn.execute("SELECT * FROM issues WHERE id = ?", (issue_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no issue {issue_id!r}")
        return row

    def add_comment(self, issue_id: str, body: str, author: str, idempotency_key: str) -> Comment:
        if not body.strip():
            raise InvalidArgumentError("body must not be empty")
        if not author.strip():
            raise InvalidArgumentError("author must not be empty")

        def write(conn: sqlite3.Connection, now: str) -> dict[str, Any]:
            self._require_issue(conn, issue_id)
            cur = conn.execute(
                "INSERT INTO comments (issue_id, author, body, created_at) VALUES (?, ?, ?, ?)",
                (issue_id, author, body, now),
            )
            conn.execute("UPDATE issues SET updated_at = ? WHERE id = ?", (now, issue_id))
            assert cur.lastrowid is not None  # set by every INSERT
            return Comment(id=cur.lastrowid, issue_id=issue_id, author=author, body=body, created_at=now).model_dump()

        request = {"issue_id": issue_id, "body": body, "author": author}
        return Comment(**self._idempotent("add_comment", idempotency_key, request, write))

    def update_issue(
        self,
        issue_id: str,
        idempotency_key: str,
        *,
        state: str | None = None,
        assignee: str | None = None,
        labels: list[str] | None = None,
        add_labels: list[str] | None = None,
    ) -> Issue:
        if state is not None and state not in STATES:
            raise InvalidArgumentError(f"state must be one of {list(STATES)}, got {state!r}")
        if state is None and assignee is None and labels is None and add_labels is None:
            raise InvalidArgumentError("nothing to update: give state, assignee, labels or add_labels")

        def write(conn: sqlite3.Connection, now: str) -> dict[str, Any]:
            row = self._require_issue(conn, issue_id)
            new_labels = list(labels) if labels is not None else json.loads(row["labels"])
            for label in add_labels or []:
                if label not in new_labels:
                    new_labels.append(label)
            conn.execute(
                "UPDATE issues SET state = ?, assignee = ?, labels = ?, updated_at = ? WHERE id = ?",
                (
                    state if state is not None else row["state"],
                    # An empty string unassigns: null already means "leave as is".
                    (assignee or None) if assignee is not None else row["assignee"],
                    json.dumps(new_labels),
                    now,
                    issue_id,
                ),
            )
            updated = conn.execute(self._ISSUE_SELECT + " WHERE i.id = ?", (issue_id,)).fetchone()
            return self._issue_from_row(updated).model_dump()

        request = {
            "issue_id": issue_id,
            "state": state,
            "assignee": assignee,
            "labels": labels,
            "add_labels": add_labels,
        }
        return Issue(**self._idempotent("update_issue", idempotency_key, request, write))
