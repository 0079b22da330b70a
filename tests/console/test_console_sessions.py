"""A session in the console: its turns and variables, a turn sent from the page, the live stream, closing."""

from __future__ import annotations

import asyncio
import json

from agent_support import make_spec
from console_support import browser, console, csrf_of, until
from session_support import session_id

from agentsteps.client.sessions import send_turn
from agentsteps.contracts.session import SessionConfig
from agentsteps.worker import running_worker

SLOW_STREAM = {
    "rules": [
        {
            "match": {"role": "user", "contains": "story"},
            "reply": {
                "content": "Once upon a time a console <b>watched</b> tokens arrive.",
                "stream": {"chunk_chars": 6, "delay_seconds": 0.1},
            },
        },
    ],
    "default": {"echo": True},
}


async def test_a_sessions_page_streams_a_turn_sent_from_it_and_lists_it_when_it_ends(client, settings, scripted):
    scripted.set_script(SLOW_STREAM)
    sid = session_id()
    spec = make_spec(tools=[], name="storyteller")
    async with running_worker(client, settings), console(client) as url, browser(url) as web:
        await send_turn(
            client,
            spec,
            "hello there",
            session_id=sid,
            task_queue=settings.task_queue,
            config=SessionConfig(stream_tokens=True),
        )
        page = (await web.get(f"/sessions/{sid}")).text
        assert "hello there" in page and 'id="turn-form"' in page and 'data-done="1"' in page
        # A run's URL for a session leads to the session page.
        assert (await web.get(f"/runs/{sid}")).headers["location"] == f"/sessions/{sid}"

        events: list[dict] = []

        async def follow() -> None:
            async with web.stream("GET", f"/sessions/{sid}/stream") as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("data: "):
                        event = json.loads(line[6:])
                        events.append(event)
                        if event.get("kind") == "turn_ended" and event.get("turn") == 2:
                            return

        follower = asyncio.ensure_future(follow())
        await asyncio.sleep(0.5)
        sent = await web.post(f"/sessions/{sid}/turn", data={"csrf": csrf_of(page), "input": "tell me a story"})
        assert "Turn sent" in (await web.get(sent.headers["location"])).text
        await asyncio.wait_for(follower, timeout=60)

        tokens = "".join(e["detail"] for e in events if e["kind"] == "token" and e["turn"] == 2)
        assert tokens == "Once upon a time a console <b>watched</b> tokens arrive."
        assert len([e for e in events if e["kind"] == "token" and e["turn"] == 2]) > 3  # it arrived in pieces

        after = await until(lambda: _text_with(web, f"/sessions/{sid}", "tell me a story"))
        assert "&lt;b&gt;watched&lt;/b&gt;" in after and "<b>watched</b>" not in after
        # The turn's timeline (the session's steps query): its one step, the final answer.
        assert "Turn 2: timeline" in after and 'id="step-0"' in after and "final answer" in after


async def test_a_busy_or_closed_session_answers_the_form_in_words(client, settings, scripted):
    scripted.set_script(
        {
            "rules": [
                {"match": {"role": "user", "contains": "slow"}, "reply": {"content": "done", "delay_seconds": 3}},
            ],
            "default": {"echo": True},
        }
    )
    sid = session_id()
    async with running_worker(client, settings), console(client) as url, browser(url) as web:
        await send_turn(client, make_spec(tools=[]), "hi", session_id=sid, task_queue=settings.task_queue)
        page = (await web.get(f"/sessions/{sid}")).text
        csrf = csrf_of(page)
        slow = await web.post(f"/sessions/{sid}/turn", data={"csrf": csrf, "input": "slow one"})
        assert "Turn sent" in (await web.get(slow.headers["location"])).text
        busy = await web.post(f"/sessions/{sid}/turn", data={"csrf": csrf, "input": "and another"})
        told = (await web.get(busy.headers["location"])).text
        assert "not sent" in told and "still running" in told
        empty = await web.post(f"/sessions/{sid}/turn", data={"csrf": csrf, "input": "   "})
        assert "not sent" in (await web.get(empty.headers["location"])).text

        closed = await web.post(f"/sessions/{sid}/close", data={"csrf": csrf, "reason": "done for today"})
        assert "Session closed after 2 turns" in (await web.get(closed.headers["location"])).text
        late = await web.post(f"/sessions/{sid}/turn", data={"csrf": csrf, "input": "one more?"})
        told = (await web.get(late.headers["location"])).text
        assert "not sent" in told and late.status_code == 303


async def _text_with(web, path: str, needle: str) -> str | None:
    text = (await web.get(path)).text
    return text if needle in text else None


async def test_a_code_mode_sessions_page_lists_its_variables_with_type_and_size_and_the_program(
    temporal_env, scripted, tmp_path
):
    import uuid

    from code_mode_support import code_worker, connect_with_store, worker_settings
    from console_support import code_spec, program_reply

    from agentsteps.client.sessions import continue_session
    from agentsteps.contracts.names import SESSION_WORKFLOW
    from agentsteps.contracts.session import SessionInput

    program = 'names = ["ana", "bo", "cy"]\nnote = "kept <for> later"\nlen(names)\n'
    scripted.set_script({"default": program_reply(program)})
    settings = worker_settings(tmp_path / "state", f"cs-{uuid.uuid4().hex[:8]}", scripted.url_openai)
    client = await connect_with_store(temporal_env.client.service_client.config.target_host, settings)
    sid = f"console-code-{uuid.uuid4().hex[:8]}"
    async with code_worker(client, settings), console(client) as url, browser(url) as web:
        await client.start_workflow(
            SESSION_WORKFLOW, SessionInput(spec=code_spec(tools=[])), id=sid, task_queue=settings.task_queue
        )
        result = await continue_session(client, sid, "remember three names")
        assert result.output == 3
        page = (await web.get(f"/sessions/{sid}")).text
    variables = page[page.index('id="variables"') :]
    assert "<code>names</code>" in variables and ">list<" in variables and ">3<" in variables
    assert "<code>note</code>" in variables and ">str<" in variables and ">16<" in variables
    assert 'class="program"' in page and "names = [" in page  # the turn's timeline shows the program
