"""The signature a receiver checks: HMAC-SHA256 under the webhook's shared secret, over timestamp and body.

    X-AgentSteps-Timestamp: 1796538229
    X-AgentSteps-Signature: v1=<hex of HMAC-SHA256(secret, "1796538229." + body)>

The timestamp is inside the signed text, so a receiver that refuses old
timestamps (five minutes) refuses a replayed notice; ``X-AgentSteps-Delivery``
(the same on every retry of one notice) lets it drop a retry it already took.
docs/console.md ("Webhooks") has the receiver's side in a few lines.
"""

from __future__ import annotations

import hashlib
import hmac

TOLERANCE_SECONDS = 300


def sign(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"v1={digest}"


def verify(secret: str, timestamp: str, body: bytes, signature: str, now: float) -> bool:
    """The receiver's check: a well-formed, fresh timestamp and a matching signature (constant time)."""
    if not timestamp.isdigit() or abs(now - int(timestamp)) > TOLERANCE_SECONDS:
        return False
    return hmac.compare_digest(sign(secret, int(timestamp), body), signature)


__all__ = ["TOLERANCE_SECONDS", "sign", "verify"]
