"""A webhook that refuses or cannot be reached: the notice fails typed and retryable, and neither the
failure, the log nor the result ever holds the webhook's URL or its secret."""

from __future__ import annotations

import logging

import pytest
from aiohttp import web
from mcp_support import free_port
from temporalio.exceptions import ApplicationError
from test_approval_notices import notice

from agentsteps.activities.notify import ApprovalNotifier
from agentsteps.contracts.config.settings import ApprovalWebhook

SECRET = "whsec-never-shown-123"
PATH = "/services/T000/B000/never-shown-xyz"


async def test_a_refusing_or_unreachable_webhook_fails_retryably_naming_it_but_never_its_url_or_secret(caplog):
    async def refuse(request: web.Request) -> web.Response:
        return web.Response(status=503)

    app = web.Application()
    app.router.add_post(PATH, refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    hooks = [
        ApprovalWebhook.model_validate({"name": "busy", "url": f"http://127.0.0.1:{port}{PATH}", "secret": SECRET}),
        ApprovalWebhook.model_validate(
            {"name": "gone", "url": f"http://127.0.0.1:{free_port()}{PATH}", "secret": SECRET}
        ),
    ]
    caplog.set_level(logging.DEBUG)
    try:
        with pytest.raises(ApplicationError) as failed:
            await ApprovalNotifier(hooks).notify(notice())
    finally:
        await runner.cleanup()
    error = failed.value
    assert error.type == "WebhookDeliveryError" and not error.non_retryable
    assert "busy (HTTP 503)" in error.message and "gone (" in error.message
    worker_log = "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith("aiohttp.access"))
    for text in (error.message, worker_log):
        assert PATH not in text and SECRET not in text and "never-shown" not in text
