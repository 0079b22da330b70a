"""The stalled-ticket monitor (``StalledTicketMonitor``): one tick per run.

1. a fixed, reviewed code-mode program (``scan.SCAN_PROGRAM``) lists the stalled
   issues through the tracker's tools and counts earlier nudges by their marker;
2. ``nudges.plan_action`` decides per issue: nudge, escalate, or leave alone;
3. each nudge is drafted by the LLM under the nudge contract (``nudge_schema``
   plus ``check_nudge``) and posted with the key ``nudge:<issue>:<date>``;
4. each escalation adds a label and reassigns to the lead, key ``escalate:<issue>``.

"At most one nudge per issue per day" and "never a duplicate comment, whatever
crashes" hold by construction: the tracker's idempotency keys make a retried or
replayed write a no-op, and the marker (with its date) lets a later tick see
what earlier ticks did, on the tracker's side, without a ledger of our own.
The types are in ``contracts/monitor.py``.
"""

from .workflow import MonitorWorkflow

__all__ = ["MonitorWorkflow"]
