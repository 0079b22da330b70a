"""The queue registry's rule (``contracts/queue_registry.decide``), without a server."""

from __future__ import annotations

import pytest

from agentsteps.contracts.queue_registry import JoinRequest, QueueFingerprint, RegistryState, StoreToken, decide

pytestmark = pytest.mark.fast

FP = QueueFingerprint(key_id="k1", tools="t1", models="m1", quotas="q1")
TOKEN = StoreToken(name="queue-token-a", digest="d-a")


def founded(now: float = 0.0) -> RegistryState:
    state = RegistryState()
    assert decide(state, JoinRequest(worker="w1", fingerprint=FP), now).status == "offer"
    assert decide(state, JoinRequest(worker="w1", fingerprint=FP, offered=TOKEN), now).status == "accepted"
    return state


def verified(worker: str, fp: QueueFingerprint = FP, found: str | None = "d-a", **extra: object) -> JoinRequest:
    return JoinRequest(worker=worker, fingerprint=fp, checked=TOKEN.name, found=found, **extra)


def test_a_newcomer_is_asked_to_verify_the_token_then_joins_when_everything_matches():
    state = founded()
    first = decide(state, JoinRequest(worker="w2", fingerprint=FP), 1.0)
    assert first.status == "verify" and first.token == TOKEN
    assert decide(state, verified("w2"), 1.0).status == "accepted"
    assert set(state.leases) == {"w1", "w2"}


def test_each_difference_is_named_and_a_rotated_key_still_joins():
    state = founded()
    answer = decide(state, verified("w2", FP.model_copy(update={"tools": "t2", "key_id": "k2"}), found=None), 1.0)
    assert answer.status == "refused" and answer.differs == ["store", "key_id", "tools"] and answer.holders == ["w1"]
    rotated = FP.model_copy(update={"key_id": "k2", "previous_key_ids": ["k1"]})
    assert decide(state, verified("w3", rotated), 1.0).status == "accepted"


def test_a_new_fingerprint_takes_over_once_every_lease_has_expired_or_when_told_to_replace():
    state = founded()
    other = FP.model_copy(update={"tools": "t2"})
    new_token = StoreToken(name="queue-token-b", digest="d-b")
    assert decide(state, verified("w2", other), 10.0).status == "refused"
    assert decide(state, JoinRequest(worker="w2", fingerprint=other, offered=new_token), 31.0).status == "accepted"
    assert state.fingerprint == other and list(state.leases) == ["w2"]
    forced = JoinRequest(worker="w3", fingerprint=FP, offered=TOKEN, replace=True)
    assert decide(state, forced, 32.0).status == "accepted" and list(state.leases) == ["w3"]
    renewal = JoinRequest(worker="w2", fingerprint=other, checked="queue-token-b", found="d-b", renewal=True)
    assert decide(state, renewal, 33.0).status == "replaced"


def test_a_founder_that_lost_the_race_verifies_and_joins():
    state = founded()
    late = JoinRequest(worker="w2", fingerprint=FP, offered=StoreToken(name="queue-token-c", digest="d-c"))
    assert decide(state, late, 1.0).status == "verify"
    assert state.token == TOKEN
