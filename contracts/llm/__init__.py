"""The ``llm.call`` contract: what goes to a model and what must come back.

Request and response types (``request``, ``messages``, ``tools``), the checks
made before a call (``preconditions``, ``pinning``) and on its answer
(``postconditions``, ``arguments``), the violations they report, the re-prompt
built from them, and token counting for the budget.
"""
