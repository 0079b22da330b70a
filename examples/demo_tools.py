"""Tools for the demo and the tests: one lookup, one side-effecting write, and one write that needs a
person's approval (``refund_order``: the call waits until someone approves or rejects it).

``send_notification`` keeps a ledger in SQLite keyed by the idempotency key, so
the number of notifications really delivered can be counted on the tool's side
(the SIGKILL test does exactly that).
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from pathlib import Path

from pydantic import BaseModel, Field

from ..activities.tools.registry import ToolContext, ToolRegistry
from ..contracts import ToolError
from ..contracts.config.settings import WorkerSettings

_WEATHER = {
    "paris": (18.5, "light rain"),
    "tokyo": (24.0, "clear"),
    "london": (14.0, "overcast"),
    "new york": (21.0, "sunny"),
}


class WeatherQuery(BaseModel):
    city: str = Field(min_length=1, max_length=100, description="City name, e.g. Paris")


class Weather(BaseModel):
    city: str
    temperature_c: float
    conditions: str


class Notification(BaseModel):
    recipient: str = Field(min_length=1, max_length=200)
    message: str = Field(min_length=1, max_length=2000)
    delay_seconds: float = Field(default=0, ge=0, le=60, description="Test hook: wait after delivering")


class Delivery(BaseModel):
    notification_id: int
    duplicate: bool


class RefundRequest(BaseModel):
    order_id: str = Field(min_length=1, max_length=40, description="Order id, e.g. A-1001")
    amount_eur: float = Field(gt=0, le=1000, description="Amount to refund, in EUR")
    reason: str = Field(default="", max_length=500)


class RefundIssued(BaseModel):
    order_id: str
    amount_eur: float
    refund_id: str


def build_registry(settings: WorkerSettings) -> ToolRegistry:
    registry = ToolRegistry()
    ledger = NotificationLedger(settings.state_dir / "notifications.db")

    @registry.tool()
    def get_weather(query: WeatherQuery) -> Weather:
        """Current weather for a city."""
        found = _WEATHER.get(query.city.strip().lower())
        if found is None:
            raise ToolError(f"no weather station for {query.city!r}; known: {', '.join(sorted(_WEATHER))}")
        return Weather(city=query.city, temperature_c=found[0], conditions=found[1])

    @registry.tool(side_effects=True)
    async def send_notification(note: Notification, ctx: ToolContext) -> Delivery:
        """Send a notification to a person. Delivered at most once per idempotency key."""
        delivery = await asyncio.to_thread(ledger.deliver, ctx.idempotency_key, note.recipient, note.message)
        if note.delay_seconds:
            await asyncio.sleep(note.delay_seconds)
        return delivery

    @registry.tool(side_effects=True, requires_approval=True)
    def refund_order(refund: RefundRequest, ctx: ToolContext) -> RefundIssued:
        """Refund an order. A person approves each refund before it is issued."""
        # The refund id derives from the idempotency key: a retried call issues the same refund.
        return RefundIssued(
            order_id=refund.order_id,
            amount_eur=refund.amount_eur,
            refund_id="R-" + hashlib.sha256(ctx.idempotency_key.encode()).hexdigest()[:8],
        )

    return registry


class NotificationLedger:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS notifications ("
                " id INTEGER PRIMARY KEY, idempotency_key TEXT UNIQUE NOT NULL,"
                " recipient TEXT NOT NULL, message TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 1)"
            )

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self._path, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        return db

    def deliver(self, key: str, recipient: str, message: str) -> Delivery:
        with self._connect() as db:
            row = db.execute("SELECT id FROM notifications WHERE idempotency_key = ?", (key,)).fetchone()
            if row:
                db.execute("UPDATE notifications SET attempts = attempts + 1 WHERE id = ?", (row[0],))
                return Delivery(notification_id=row[0], duplicate=True)
            cur = db.execute(
                "INSERT INTO notifications (idempotency_key, recipient, message) VALUES (?, ?, ?)",
                (key, recipient, message),
            )
            return Delivery(notification_id=int(cur.lastrowid or 0), duplicate=False)

    def delivered(self) -> list[tuple[str, str, int]]:
        with self._connect() as db:
            return db.execute("SELECT idempotency_key, recipient, attempts FROM notifications ORDER BY id").fetchall()
