"""Is every value an output schema allows accepted by the next input schema?

``check_schema_compat(output_schema, input_schema)`` answers with one verdict:

- **proven**: every instance of the output schema validates against the input
  schema. Only returned when each keyword involved was reasoned about soundly.
- **refuted**: with a concrete counterexample that was checked with
  ``jsonschema``: it validates against the output schema and fails the input
  schema (both at the schemas' roots, so ``$ref``s resolve as at run time).
- **unproven**: with the reason and the JSON path where reasoning stopped
  (a ``pattern`` or ``format`` that differs, a recursive ``$ref``, a keyword
  this checker does not model, ...). Never a disguised "proven".

Why our own checker rather than an existing prover (evaluated on the schemas
pydantic emits, with ``pip download`` and a scratch venv):

- PyPI ``subschema`` (a conservative Draft 2020-12 prover, the best fit on
  paper) requires Python >= 3.12 in every release (0.0.1 to 0.1.0), and pulls
  in ``z3-solver`` and ``jsonschema-rs``. This project runs on 3.11: pip
  refuses to install it.
- PyPI ``jsonsubschema`` (IBM) implements Draft 4 only. On pydantic schemas it
  raised ``SchemaError`` for numeric ``exclusiveMinimum`` (Draft 6+ emitted by
  ``Field(gt=0)``) and ``JsonRefError`` on a recursive model's ``$defs``; it
  answers a bare boolean with no counterexample and no reason.

So this module decides the fragment pydantic emits -- ``$defs``/``$ref``,
``anyOf`` for ``Optional``, ``enum``/``const``, ``type`` lists, nested objects
and arrays, ``required``, ``additionalProperties`` (bool or schema), numeric
and length bounds -- and says "unproven" for everything else.

Soundness rules (why each shortcut is safe):

- A side's *extra* constraints only shrink the set of output values, so
  narrowing-only keywords on the output side (``not``, ``minProperties``, ...)
  may be ignored when proving. Keywords that change how *other* keywords read
  (``patternProperties`` changes ``additionalProperties``, ``prefixItems``
  changes ``items``) may not, so they make the edge unproven.
- Every keyword on the input side must be shown to be implied; any keyword not
  modelled makes the edge unproven.
- ``anyOf`` on the output side: every branch must be accepted. On the input
  side: the output must fit inside one branch (conservative: a union split
  across branches is reported unproven unless a counterexample is found).
- Finite output sets (``enum``/``const``, and ``null``/``boolean``) are
  decided exactly by validating every value.
- ``format``: jsonschema does not assert it unless asked. Proofs hold under
  both readings: output values are enumerated without format assertion (the
  larger set) and checked against the input with it (the smaller set);
  counterexamples satisfy the output with format assertion and fail the input
  without it.

Pure: no I/O. Validators get an empty ``referencing.Registry`` so a remote
``$ref`` is never fetched; it is simply not resolvable (unproven).
"""

from __future__ import annotations

from .compat import check_schema_compat, ensure_schema
from .results import CompatResult, Counterexample, Verdict

__all__ = ["CompatResult", "Counterexample", "Verdict", "check_schema_compat", "ensure_schema"]
