"""Where yesterday's releases live: every branch kept only for runs and workers from before a change.

Today's path (``agent_run.py``, the loops, ``calls.py``, ``session.py``) reads
as the current behaviour and asks one named question where an older run or
worker does something else. The answers and the old branches are here:

- ``registry.py``: every ``workflow.patched`` id, the change that added it,
  the recorded histories in ``tests/histories/`` that need it and when it may
  go. Pure data; the tests hold it to the code and to the histories.
- ``gates.py``: every ``workflow.patched`` question, asked at the point of the
  command order where it always was (``Features``: an agent run's answers).
- ``older_runs.py``: what an agent run recorded before a patch does instead.
- ``older_workers.py``: model calls during a rolling upgrade (activity names
  only upgraded workers register, and waiting for one).

Adding a command change: a new id in ``contracts/names.py``, its question in
``gates.py``, its old branch (if it is more than a condition) in
``older_runs.py``, its row in ``registry.py``, and a recorded history of the
old shape (docs/upgrades.md). Workflow modules import names from these
modules (``from .releases.gates import Features``), never a module itself:
``calls.py``'s docstring says why.
"""
