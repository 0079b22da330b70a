"""A knock on the door: each call that starts waiting reaches its webhook once, signed, through a SIGKILL.

A real worker process posts the notice to a receiver on loopback; the test
kills it while the receiver holds the request open (the notice was taken, the
worker never heard so). The next worker retries the same notice under the same
delivery id, so the receiver, keeping ids, acts on it once. A call nobody
decides is reminded before its timeout. The webhook's secret and URL appear in
no history.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

from approval_support import REFUND_SCRIPT, approval_registry, webhook_settings
from console_support import start_run, wait_pending
from process_support import STICKY_AFTER_KILL, kill, start_worker_process
from webhook_receiver import receiving

from agentsteps.client.sessions import decide_approval
from agentsteps.contracts.approvals import card_anchor
from agentsteps.worker import running_worker

WORKER = Path(__file__).parents[1] / "support" / "webhook_worker.py"
SECRET = "whsec-test-0123456789abcdef"
CONSOLE = "https://console.example"


async def _taken(receiver, delivery_id_part: str, timeout: float = 30.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        found = [n for d, n in receiver.taken().items() if delivery_id_part in d]
        if found:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"no notice for {delivery_id_part}")


async def test_each_waiting_call_reaches_its_webhook_once_signed_within_2_s_through_a_worker_sigkill(
    client, settings, scripted, tmp_path
):
    scripted.set_script(REFUND_SCRIPT)
    address = client.service_client.config.target_host
    env = {"AGENTSTEPS_TEST_WEBHOOK_SECRET": SECRET, **STICKY_AFTER_KILL}
    async with receiving(SECRET) as receiver:
        hooked = webhook_settings(settings, receiver.url, SECRET, CONSOLE)
        args = (address, settings.task_queue, scripted.url_openai, settings.state_dir, receiver.url, CONSOLE)
        receiver.stall_next = True
        first = start_worker_process(WORKER, *args, env=env)
        try:
            killed_run = await start_run(client, settings.task_queue, tools=["refund"], name="refunds")
            await asyncio.wait_for(receiver.stalled.wait(), 30)  # the notice reached the receiver...
            kill(first)  # ...and the worker dies before it hears the answer
            receiver.release.set()
        finally:
            kill(first)
        async with running_worker(client, hooked, registry=approval_registry([])):
            killed_call = await wait_pending(client, killed_run.id)
            [notice] = await _taken(receiver, f"{killed_run.id}/")  # retried after the kill, taken once
            await _posted_twice(receiver, notice.delivery_id)  # same id both times (the retry follows the kill
            # by the notice's heartbeat timeout, which may be after the run already shows its call waiting)

            calm_run = await start_run(client, settings.task_queue, tools=["refund"], name="refunds")
            calm_call = await wait_pending(client, calm_run.id)
            waiting_at = asyncio.get_running_loop().time()
            [calm] = await _taken(receiver, f"{calm_run.id}/")
            assert calm.at - waiting_at < 2.0

            quiet_run = await start_run(
                client, settings.task_queue, tools=["refund"], name="refunds", approval_timeout_seconds=2.5
            )
            reminders = await _taken(receiver, f"{quiet_run.id}/", timeout=15)
            reminders = reminders if len(reminders) == 2 else await _wait_two(receiver, quiet_run.id)
            assert (await quiet_run.result()).output == "Nobody approved it."

            for handle, call in ((killed_run, killed_call), (calm_run, calm_call)):
                await decide_approval(client, handle.id, call.approval_id, approve=True, approver="ana")
                assert (await handle.result()).output == "Refunded 40."
            history = _readable(await killed_run.fetch_history())

    for n in receiver.posts:
        assert n.signed and n.headers["Idempotency-Key"] == n.delivery_id
    taken = receiver.taken()
    per_call = sorted(d.rsplit("/", 1)[1] for d in taken)
    assert per_call == ["reminder", "waiting", "waiting", "waiting"]  # one per waiting call, one reminder
    body = notice.body
    assert body["approval"]["tool"] == "refund" and body["approval"]["arguments"] == {"order": "A-17", "amount": 40.0}
    assert body["approval"]["expires_at"] and body["approval"]["reason"].startswith("refund requires")
    assert (
        body["approval"]["link"]
        == f"{CONSOLE}/runs/{killed_run.id}#{card_anchor(killed_run.id, killed_call.approval_id)}"
    )
    assert body["text"].startswith("Waiting for approval: refund (refunds)") and body["blocks"]
    assert "refund-desk" in history and notice.delivery_id in history  # the delivery, recorded
    assert SECRET not in history and receiver.url not in history  # never the secret or the URL


def _readable(history) -> str:
    """The history's JSON with every payload's bytes decoded beside it: what anyone reading it can see."""
    raw = history.to_json_dict()
    decoded: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "data" and isinstance(value, str):
                    decoded.append(base64.b64decode(value).decode("utf-8", "replace"))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(raw)
    return json.dumps(raw) + "\n".join(decoded)


async def _posted_twice(receiver, delivery_id: str) -> None:
    for _ in range(1500):
        if [n.delivery_id for n in receiver.posts].count(delivery_id) >= 2:
            break
        await asyncio.sleep(0.02)
    assert [n.delivery_id for n in receiver.posts].count(delivery_id) == 2


async def _wait_two(receiver, workflow_id: str):
    for _ in range(500):
        found = [n for d, n in receiver.taken().items() if f"{workflow_id}/" in d]
        if len(found) == 2:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError("no reminder")
