"""The approvals inbox over HTTP: what an approver sees, deciding with a note, late and withdrawn decisions, CSRF."""

from __future__ import annotations

from approval_support import REFUND_SCRIPT, approval_worker
from console_support import browser, console, csrf_of, start_run, until, wait_pending

from agentsteps.contracts.names import SA_AWAITING_APPROVAL


async def awaiting(client, workflow_id: str) -> bool | None:
    async for wf in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        return {p.key.name: p.value for p in wf.typed_search_attributes}.get(SA_AWAITING_APPROVAL)
    return None


async def test_the_inbox_lists_a_waiting_call_with_its_arguments_and_an_approval_with_a_note_completes_the_run(
    client, settings, scripted
):
    scripted.set_script(REFUND_SCRIPT)
    ran: list[str] = []
    async with approval_worker(client, settings, ran), console(client) as url, browser(url) as web:
        handle = await start_run(client, settings.task_queue, tools=["refund"], name="refunds")
        pending = await wait_pending(client, handle.id)
        assert await until(lambda: awaiting(client, handle.id)) is True
        assert handle.id in (await web.get("/runs", params={"waiting": "1"})).text

        inbox = await until(lambda: _page_with(web, "/approvals", pending.approval_id))
        assert "refund" in inbox and "A-17" in inbox and "40.0" in inbox and handle.id in inbox
        assert ">Order<" in inbox and ">Amount<" in inbox  # each argument by the title its schema gives it
        assert "requires a person" in inbox
        live = (await web.get("/approvals/live")).text
        assert pending.approval_id in live and "<html" not in live  # the fragment the page refreshes with

        decided = await web.post(
            "/approvals/decide",
            data={
                "csrf": csrf_of(inbox),
                "workflow_id": handle.id,
                "approval_id": pending.approval_id,
                "decision": "approve",
                "note": "customer verified",
                "name": "Ana Ortiz",
            },
        )
        assert decided.status_code == 303
        told = (await web.get(decided.headers["location"])).text
        assert "refund was approved by Ana Ortiz" in told

        result = await handle.result()
        assert result.output == "Refunded 40." and len(ran) == 1
        [record] = result.approvals  # who decided, when and why, in the run's own result
        assert (record.outcome, record.approver, record.note) == ("approved", "Ana Ortiz", "customer verified")
        run_page = (await web.get(f"/runs/{handle.id}")).text
        assert "Ana Ortiz" in run_page and "customer verified" in run_page
        assert await until(lambda: _not(awaiting(client, handle.id)))
        # The name is remembered for the next decision.
        assert "Ana Ortiz" in (await web.get("/approvals")).text


async def test_a_second_decision_and_a_decision_on_an_ended_run_get_a_clear_answer_not_an_error_page(
    client, settings, scripted
):
    scripted.set_script(REFUND_SCRIPT)
    async with approval_worker(client, settings, []), console(client) as url, browser(url) as web:
        handle = await start_run(client, settings.task_queue, tools=["refund"])
        pending = await wait_pending(client, handle.id)
        page = (await web.get("/approvals")).text
        form = {"csrf": csrf_of(page), "workflow_id": handle.id, "approval_id": pending.approval_id, "name": "bo"}

        first = await web.post("/approvals/decide", data={**form, "decision": "reject", "note": "too much"})
        assert "refund was rejected by bo" in (await web.get(first.headers["location"])).text
        assert (await handle.result()).output == "The refund was refused."

        again = await web.post("/approvals/decide", data={**form, "decision": "approve"})
        told = await web.get(again.headers["location"])
        assert told.status_code == 200
        # What happened, in plain words: who decided, and when; never "withdrawn" for a call that was decided.
        assert "Not recorded: refund was already rejected by bo at " in told.text and "withdrawn" not in told.text

        unknown = await web.post(
            "/approvals/decide", data={**form, "workflow_id": "no-such-run", "decision": "approve"}
        )
        told = (await web.get(unknown.headers["location"])).text
        assert "Not recorded: there is no run or session no-such-run" in told


async def test_a_decision_after_a_timeout_or_a_termination_says_so_and_the_waiting_filter_drops_the_stopped_run(
    client, settings, scripted
):
    scripted.set_script(REFUND_SCRIPT)
    async with approval_worker(client, settings, []), console(client) as url, browser(url) as web:
        quick = await start_run(client, settings.task_queue, tools=["refund"], approval_timeout_seconds=1)
        stopped = await start_run(client, settings.task_queue, tools=["refund"])
        late, doomed = await wait_pending(client, quick.id), await wait_pending(client, stopped.id)
        page = await until(lambda: _page_with(web, "/approvals", doomed.approval_id))
        await stopped.terminate("wrong customer")
        assert (await quick.result()).output == "Nobody approved it."
        form = {"csrf": csrf_of(page), "decision": "approve", "name": "eve"}

        timed_out = await web.post(
            "/approvals/decide", data={**form, "workflow_id": quick.id, "approval_id": late.approval_id}
        )
        told = (await web.get(timed_out.headers["location"])).text
        assert "Not recorded: refund timed out at " in told and "nobody decided in time" in told

        after_stop = await web.post(
            "/approvals/decide", data={**form, "workflow_id": stopped.id, "approval_id": doomed.approval_id}
        )
        told = (await web.get(after_stop.headers["location"])).text
        assert "Not recorded: the run was stopped (terminated) at " in told and "while this call waited" in told
        never = await web.post(
            "/approvals/decide", data={**form, "workflow_id": stopped.id, "approval_id": "0:call_never_0"}
        )
        told = (await web.get(never.headers["location"])).text
        assert "the run was stopped (terminated) at " in told and "no call of it ever waited under that id" in told
        finished = await web.post(
            "/approvals/decide", data={**form, "workflow_id": quick.id, "approval_id": "0:call_never_0"}
        )
        told = (await web.get(finished.headers["location"])).text
        assert "Not recorded: the run finished at " in told and "no call of it ever waited under that id" in told
        # The terminated run still carries AgentStepsAwaitingApproval = true; the filter lists running runs only.
        assert stopped.id not in (await web.get("/runs", params={"waiting": "1"})).text


async def test_a_second_decision_while_the_run_goes_on_says_who_decided_first(client, settings, scripted):
    script = {
        "rules": [
            {
                "match": {"role": "user"},
                "reply": {"tool_calls": [{"name": "refund", "arguments": {"order": "A-17", "amount": 40.0}}]},
            },
            {
                "match": {"tool_result_for": "refund"},
                "reply": {"tool_calls": [{"name": "refund", "arguments": {"order": "B-2", "amount": 1.0}}]},
            },
        ]
    }
    scripted.set_script(script)
    async with approval_worker(client, settings, []), console(client) as url, browser(url) as web:
        handle = await start_run(client, settings.task_queue, tools=["refund"])
        pending = await wait_pending(client, handle.id)
        page = (await web.get("/approvals")).text
        form = {"csrf": csrf_of(page), "workflow_id": handle.id, "approval_id": pending.approval_id, "name": "cy"}
        await web.post("/approvals/decide", data={**form, "decision": "approve"})
        late = await web.post("/approvals/decide", data={**form, "decision": "reject", "name": "dee"})
        told = (await web.get(late.headers["location"])).text
        assert "Not recorded" in told and "already approved by cy" in told
        await handle.cancel()


async def test_a_decision_without_the_pages_csrf_field_is_refused_and_changes_nothing(client, settings, scripted):
    scripted.set_script(REFUND_SCRIPT)
    async with approval_worker(client, settings, []), console(client) as url, browser(url) as web:
        handle = await start_run(client, settings.task_queue, tools=["refund"])
        pending = await wait_pending(client, handle.id)
        page = (await web.get("/approvals")).text
        form = {"workflow_id": handle.id, "approval_id": pending.approval_id, "decision": "approve"}

        missing = await web.post("/approvals/decide", data=form)
        forged = await web.post("/approvals/decide", data={**form, "csrf": "0" * 64})
        # Another site's form carries this browser's cookie but cannot read the page's field.
        cross_site = await web.post(
            "/approvals/decide", data={**form, "csrf": csrf_of(page)}, headers={"Origin": "https://evil.example"}
        )
        async with browser(url) as stranger:  # a valid field of another browser is no good either
            stolen = await stranger.post("/approvals/decide", data={**form, "csrf": csrf_of(page)})

        assert [r.status_code for r in (missing, forged, cross_site, stolen)] == [403, 403, 403, 403]
        odd = await web.post("/approvals/decide", data={**form, "csrf": csrf_of(page), "decision": "maybe"})
        assert "lacked the call or the decision" in (await web.get(odd.headers["location"])).text
        offsite = await web.post(
            "/approvals/decide",
            data={**form, "csrf": csrf_of(page), "decision": "explode", "back": "https://evil.example/"},
        )
        assert offsite.headers["location"].startswith("/approvals?flash=")  # never redirected off the console
        assert "Reload the page" in missing.text
        assert (await wait_pending(client, handle.id)).approval_id == pending.approval_id  # still waiting
        await handle.cancel()


async def _page_with(web, path: str, needle: str) -> str | None:
    text = (await web.get(path)).text
    return text if needle in text else None


async def _not(value) -> bool:
    return not await value


async def test_in_code_mode_the_inbox_shows_the_program_making_the_call_and_escapes_it(
    temporal_env, scripted, tmp_path
):
    import uuid

    from code_mode_support import code_worker, connect_with_store, worker_settings
    from console_support import code_spec, program_reply

    from agentsteps.contracts import AgentInput, AgentResult
    from agentsteps.contracts.names import AGENT_WORKFLOW

    program = '# close it </pre><script>window.__pwned=1</script>\nr = await tickets_close(id=7)\nr["id"]\n'
    scripted.set_script({"default": program_reply(program)})
    settings = worker_settings(tmp_path / "state", f"cm-{uuid.uuid4().hex[:8]}", scripted.url_openai)
    client = await connect_with_store(temporal_env.client.service_client.config.target_host, settings)
    async with code_worker(client, settings), console(client) as url, browser(url) as web:
        handle = await client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=code_spec(tools=["tickets.close"]), input="close ticket 7"),
            id=f"console-cm-{uuid.uuid4().hex[:8]}",
            task_queue=settings.task_queue,
            result_type=AgentResult,
        )
        pending = await wait_pending(client, handle.id)
        assert "tickets_close(id=7)" in pending.program
        inbox = (await web.get("/approvals")).text
        assert 'class="program"' in inbox and "r = await tickets_close(id=7)" in inbox
        assert "<script>window.__pwned" not in inbox and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in inbox
        page = (await web.get(f"/runs/{handle.id}")).text
        assert pending.approval_id in page  # the run's page offers the decision too
        await handle.cancel()


async def test_a_notices_signed_link_opens_a_confirmation_and_a_forged_expired_or_replayed_one_changes_nothing(
    client, settings, scripted
):
    from datetime import timedelta
    from urllib.parse import urlsplit

    from agentsteps.activities.notify.shapes import decision_link
    from agentsteps.contracts.approvals import ApprovalNotice

    scripted.set_script(REFUND_SCRIPT)
    secret = "link-secret-0123456789"
    async with approval_worker(client, settings, []), console(client, link_secret=secret) as url:
        handle = await start_run(client, settings.task_queue, tools=["refund"])
        pending = await wait_pending(client, handle.id)

        def link(decision: str, key: str = secret, **changes) -> str:
            notice = ApprovalNotice(delivery_id="d", workflow_id=handle.id, pending=pending.model_copy(update=changes))
            full = decision_link(url, key, notice, decision)
            return full[len(url) :]

        async with browser(url) as web:
            page = await web.get(link("approve"))
            assert page.status_code == 200 and "Approve this call?" in page.text and pending.approval_id in page.text
            forged = await web.get(link("approve", key="guessed-secret-000"))
            altered = await web.get(link("approve").replace("d=approve", "d=reject"))
            expired = await web.get(link("approve", expires_at=pending.requested_at - timedelta(seconds=1)))
            assert [r.status_code for r in (forged, altered, expired)] == [403, 403, 410]
            assert "Nothing was decided" in forged.text and "expired" in expired.text
            assert (await wait_pending(client, handle.id)).approval_id == pending.approval_id  # still waiting

            decided = await web.post(
                "/approvals/decide",
                data={
                    "csrf": csrf_of(page.text),
                    "workflow_id": handle.id,
                    "approval_id": pending.approval_id,
                    "decision": "approve",
                    "name": "ana",
                },
            )
            assert urlsplit(decided.headers["location"]).path == "/approvals"
            await handle.result()
            replayed = await web.get(link("approve"))
            assert "Nothing to decide" in replayed.text and "already approved by ana at " in replayed.text
        assert len((await handle.result()).approvals) == 1
