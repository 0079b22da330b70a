"""``approval.notify``: a call waiting for a person, told to the webhooks of its tool or agent, signed."""

from .signing import sign, verify
from .webhooks import ApprovalNotifier

__all__ = ["ApprovalNotifier", "sign", "verify"]
