"""Who may use the console: loopback by default, a token or an auth proxy anywhere else."""

from __future__ import annotations

import pytest
from approval_support import REFUND_SCRIPT, approval_worker
from console_support import browser, console, csrf_of, start_run, wait_pending
from pydantic import SecretStr

from agentsteps.console import ConsoleConfigError, check_binding
from agentsteps.contracts.config.settings import ConsoleSettings


def test_beyond_loopback_the_console_needs_a_token_or_an_auth_proxy():
    for host in ("0.0.0.0", "10.1.2.3", "::", "console.internal"):
        with pytest.raises(ConsoleConfigError, match="AGENTSTEPS_CONSOLE_TOKEN"):
            check_binding(ConsoleSettings(host=host))
        check_binding(ConsoleSettings(host=host, token=SecretStr("t")))
        check_binding(ConsoleSettings(host=host, proxy_user_header="X-Forwarded-User"))
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        check_binding(ConsoleSettings(host=host))


async def test_an_exposed_console_does_not_start(client):
    with pytest.raises(ConsoleConfigError):
        async with console(client, host="0.0.0.0"):
            pass


async def test_with_a_token_every_page_asks_for_it_and_the_sign_in_never_redirects_off_site(client):
    token = "correct horse battery staple"
    async with console(client, token=SecretStr(token)) as url, browser(url) as web:
        first = await web.get("/runs")
        assert first.status_code == 303 and first.headers["location"].startswith("/login")
        assert (await web.get("/approvals/live")).status_code == 401
        assert (await web.get("/sessions/x/stream")).status_code == 401
        assert (await web.get("/runs", headers={"Authorization": "Bearer wrong"})).status_code == 303

        login = (await web.get("/login", params={"next": "//evil.example/x"})).text
        wrong = await web.post("/login", data={"csrf": csrf_of(login), "token": "guess", "next": "/runs"})
        assert wrong.status_code == 401 and "not this console" in wrong.text
        signed = await web.post("/login", data={"csrf": csrf_of(login), "token": token, "next": "//evil.example/x"})
        assert signed.status_code == 303 and signed.headers["location"] == "/approvals"
        assert (await web.get("/runs")).status_code == 200  # the cookie now
        cookie = signed.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and token not in cookie

    async with console(client, token=SecretStr(token)) as url, browser(url) as api:
        assert (await api.get("/runs", headers={"Authorization": f"Bearer {token}"})).status_code == 200


async def test_behind_an_auth_proxy_the_proxys_user_is_the_approver(client, settings, scripted):
    scripted.set_script(REFUND_SCRIPT)
    header = "X-Forwarded-User"
    async with approval_worker(client, settings, []), console(client, proxy_user_header=header) as url:
        async with browser(url) as web:
            refused = await web.get("/approvals")
            assert refused.status_code == 401 and "sign-in" in refused.text
            assert (await web.get("/login")).status_code == 401

            web.headers[header] = "lee@example.com"
            handle = await start_run(client, settings.task_queue, tools=["refund"])
            pending = await wait_pending(client, handle.id)
            page = (await web.get("/approvals")).text
            assert 'name="name"' not in page  # nobody types a name: the proxy says who it is
            await web.post(
                "/approvals/decide",
                data={
                    "csrf": csrf_of(page),
                    "workflow_id": handle.id,
                    "approval_id": pending.approval_id,
                    "decision": "approve",
                    "name": "someone else",
                },
            )
            [record] = (await handle.result()).approvals
            assert record.approver == "lee@example.com"


async def test_without_a_token_only_a_loopback_host_name_is_answered(client):
    """DNS rebinding: another site's name resolving to 127.0.0.1 reaches the socket, but not the pages."""
    async with console(client) as url, browser(url) as web:
        port = url.rsplit(":", 1)[1]
        assert (await web.get("/runs", headers={"Host": f"rebound.evil.example:{port}"})).status_code == 403
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "127.0.0.1"):
            assert (await web.get("/runs", headers={"Host": host})).status_code == 200, host
    async with console(client, token=SecretStr("t")) as url, browser(url) as web:
        # With a token the name does not matter (a proxy or ingress names it); the token does.
        assert (
            await web.get("/runs", headers={"Host": "console.example", "Authorization": "Bearer t"})
        ).status_code == 200


async def test_a_persons_own_token_signs_them_in_by_name_and_the_decision_records_that_name_not_a_typed_one(
    client, settings, scripted
):
    scripted.set_script(REFUND_SCRIPT)
    people = {"Ana Ortiz": SecretStr("ana-token-0123456"), "Bo Lind": SecretStr("bo-token-0123456")}
    async with approval_worker(client, settings, []), console(client, people=people) as url, browser(url) as web:
        assert (await web.get("/approvals/events")).status_code == 401  # the live stream asks too
        login = (await web.get("/login")).text
        signed = await web.post("/login", data={"csrf": csrf_of(login), "token": "bo-token-0123456", "next": "/"})
        assert signed.status_code == 303 and "bo-token" not in signed.headers["set-cookie"]
        handle = await start_run(client, settings.task_queue, tools=["refund"])
        pending = await wait_pending(client, handle.id)
        page = (await web.get("/approvals")).text
        assert "Bo Lind" in page and 'name="name"' not in page  # nobody types a name: the token says who
        form = {"csrf": csrf_of(page), "workflow_id": handle.id, "approval_id": pending.approval_id}
        await web.post("/approvals/decide", data={**form, "decision": "approve", "name": "Ana Ortiz"})
        [record] = (await handle.result()).approvals
        assert record.approver == "Bo Lind"
    with pytest.raises(ValueError, match="their own token"):
        ConsoleSettings(people={"a": SecretStr("same-token-123"), "b": SecretStr("same-token-123")})
    check_binding(ConsoleSettings(host="0.0.0.0", people=people))


async def test_a_hostile_proxy_header_shows_as_text_and_a_malformed_one_is_refused(client):
    header = "X-Forwarded-User"
    async with console(client, proxy_user_header=header) as url, browser(url) as web:
        hostile = await web.get("/runs", headers={header: '<img src=x onerror="alert(1)">'})
        assert hostile.status_code == 200
        assert "<img src=x" not in hostile.text and "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in hostile.text
        for bad in ("lee\tbob", "x" * 201):
            refused = await web.get("/runs", headers={header: bad})
            assert refused.status_code == 400 and "does not hold a name" in refused.text, bad
            assert bad not in refused.text
