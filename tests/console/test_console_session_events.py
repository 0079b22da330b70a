"""``GET /api/sessions/{id}/events``: a session's answer as server-sent events, with the console's auth,
resumed exactly with ``Last-Event-ID``; hostile positions are refused typed."""

from __future__ import annotations

import asyncio
import json

import httpx
from console_support import console
from session_support import session_id, turn

from agentsteps.client.session_stream import feeds_open
from agentsteps.client.sessions import close_session
from agentsteps.contracts.session import SessionConfig

ANSWER = "Lisbon is sunny today, 24 degrees, with a light breeze from the Atlantic and no rain expected."
TOKEN = "s3cret-console-token"


async def read_events(web: httpx.AsyncClient, sid: str, *, headers=None, stop_after: int | None = None):
    """(id, event, data) for each event, until the response ends or ``stop_after`` events (a disconnect)."""
    events: list[tuple[int | None, str, dict]] = []
    current: dict[str, str] = {}
    url = f"/api/sessions/{sid}/events"
    async with web.stream("GET", url, params={"until": "turn_ended"}, headers=headers or {}) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith(":"):
                continue
            if line:
                key, _, value = line.partition(":")
                current[key] = value.strip()
                continue
            if "data" in current:
                ident = current.get("id")
                events.append((int(ident) if ident else None, current.get("event", ""), json.loads(current["data"])))
                if stop_after is not None and len(events) >= stop_after:
                    return events
            current = {}
    return events


async def test_a_backend_reads_a_turn_over_sse_drops_and_resumes_with_last_event_id_and_gets_it_exactly(
    engine, scripted
):
    scripted.set_script({"default": {"content": ANSWER, "stream": {"chunk_chars": 4, "delay_seconds": 0.03}}})
    sid = session_id()
    await turn(engine, sid, "hello", tools=[], config=SessionConfig(stream_tokens=True))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with console(engine.client, token=TOKEN) as url, httpx.AsyncClient(base_url=url, timeout=30) as web:
        refused = await web.get(f"/api/sessions/{sid}/events")
        assert refused.status_code == 401 and refused.json()["error"] == "ConsoleAuth"
        running = asyncio.ensure_future(turn(engine, sid, "weather in Lisbon?", tools=[]))
        await asyncio.sleep(0.3)
        first = await read_events(web, sid, headers=auth, stop_after=4)  # the page closes mid-answer
        last_id = first[-1][0]
        rest = await read_events(web, sid, headers={**auth, "Last-Event-ID": str(last_id)})
        result = await running
        for _ in range(100):  # the closed connections leave nothing polling the session
            if feeds_open() == 0:
                break
            await asyncio.sleep(0.02)
        assert feeds_open() == 0
    events = [e for e in first + rest if e[1] != "end"]
    ids = [e[0] for e in events]
    assert ids == sorted(set(ids))  # each position once, in order
    assert "".join(d["text"] for _, kind, d in events if kind == "text") == ANSWER == result.output
    assert events[0][1] == "turn_started" and events[0][2]["turn"] == 2
    assert events[-1][1] == "turn_ended" and events[-1][2]["agrees"] is True
    await close_session(engine.client, sid, "done")


HOSTILE = ["abc", "-2", "1e9", "9" * 30, "1;DROP", "", "0x10", "7 7", "+3"]


async def test_a_resume_position_that_is_not_a_position_is_refused_with_stream_position_error(engine, scripted):
    scripted.set_script({"default": {"content": "hi"}})
    sid = session_id()
    await turn(engine, sid, "hello", tools=[])
    refused = []
    async with console(engine.client) as url, httpx.AsyncClient(base_url=url, timeout=10) as web:
        for position in HOSTILE:
            refused.append(await web.get(f"/api/sessions/{sid}/events", headers={"Last-Event-ID": position}))
            refused.append(await web.get(f"/api/sessions/{sid}/events", params={"after": position}))
        refused.append(await web.get(f"/api/sessions/{sid}/events", params={"after": "\u0661\u0662"}))
        refused.append(await web.get(f"/api/sessions/{sid}/events", params={"until": "forever"}))
        unknown = await web.get("/api/sessions/no-such-session/events")
    assert [(r.status_code, r.json()["error"]) for r in refused] == [(400, "StreamPositionError")] * len(refused)
    assert unknown.status_code == 404
    await close_session(engine.client, sid, "done")


async def test_behind_the_auth_proxy_the_events_need_its_header_and_a_name_in_it(engine, scripted):
    scripted.set_script({"default": {"content": "hi"}})
    sid = session_id()
    await turn(engine, sid, "hello", tools=[])
    header = "X-Forwarded-User"
    async with console(engine.client, proxy_user_header=header) as url, httpx.AsyncClient(base_url=url) as web:
        missing = await web.get(f"/api/sessions/{sid}/events")
        garbled = await web.get(f"/api/sessions/{sid}/events", headers={header: "ana\x7f"})
        read = await read_events(web, sid, headers={header: "ana", "Last-Event-ID": "-1"})
    assert (missing.status_code, missing.json()["error"]) == (401, "ConsoleAuth")
    assert (garbled.status_code, garbled.json()["error"]) == (400, "ConsoleAuth")
    assert read[-1][1] == "turn_ended" and read[-1][2]["agrees"] is True  # nothing streamed, nothing contradicts it
    await close_session(engine.client, sid, "done")
