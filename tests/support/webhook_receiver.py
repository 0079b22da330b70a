"""A webhook receiver on loopback, as a deployment's would be: it checks each notice's signature and
keeps what it took, by delivery id (its idempotency key)."""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from mcp_support import free_port

from agentsteps.activities.notify import verify


@dataclass
class Notice:
    delivery_id: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float
    signed: bool


@dataclass
class Receiver:
    secret: str
    url: str = ""
    posts: list[Notice] = field(default_factory=list)
    stall_next: bool = False
    """Hold the next request unanswered until ``release`` is set (a worker is killed meanwhile)."""
    stalled: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def taken(self) -> dict[str, Notice]:
        """What the receiver acts on: one notice per delivery id, each signed."""
        return {n.delivery_id: n for n in self.posts if n.signed}

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        headers = dict(request.headers)
        signed = verify(
            self.secret,
            headers.get("X-AgentSteps-Timestamp", ""),
            raw,
            headers.get("X-AgentSteps-Signature", ""),
            time.time(),
        )
        notice = Notice(headers.get("X-AgentSteps-Delivery", ""), json.loads(raw), headers, time.monotonic(), signed)
        self.posts.append(notice)
        if self.stall_next:
            self.stall_next = False
            self.stalled.set()
            await self.release.wait()
            return web.Response(status=200)  # to a worker already dead: it never learns the notice was taken
        return web.Response(status=200 if signed else 401)


@asynccontextmanager
async def receiving(secret: str):
    receiver = Receiver(secret)
    app = web.Application()
    app.router.add_post("/hook", receiver.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    receiver.url = f"http://127.0.0.1:{port}/hook"
    try:
        yield receiver
    finally:
        receiver.release.set()
        await runner.cleanup()
