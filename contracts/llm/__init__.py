"""The ``llm.call`` contract: what goes to a model and what must come back.

Request and response types (``request``, ``messages``, ``tools``), the checks
made before a call (``preconditions``, ``pinning``) and on its answer
(``postconditions``, ``arguments``), the violations they report, the re-prompt
built from them, token counting for the budget, what each model accepts
(``capabilities``), tool names as the APIs spell them (``tool_names``) and
engine-unique tool-call ids (``call_ids``).
"""
