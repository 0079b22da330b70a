"""``agentsteps check FILE``: table, JSON and exit codes for good, bad and invalid files."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest

from agentsteps.cli.check import EXIT_FAILED, EXIT_INVALID, EXIT_OK, check_command

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pipelines" / "support_reply.toml"

BAD = """
name = "bad"
[[steps]]
name = "a"
kind = "llm"
output_schema = { type = "object", properties = { n = { type = "number" } }, required = ["n"] }
[[steps]]
name = "b"
kind = "tool"
input_schema = { type = "object", properties = { n = { type = "integer" } }, required = ["n"] }
output_schema = { type = "string", pattern = "^[A-Z]+$" }
[[steps]]
name = "c"
kind = "llm_final"
input_schema = { type = "string", pattern = "^[A-Z]{1,5}$" }
"""


def run(path: Path, as_json: bool) -> tuple[int, str]:
    out = io.StringIO()
    code = check_command(str(path), as_json, out=out)
    return code, out.getvalue()


def test_the_example_pipeline_checks_ok_with_exit_0():
    code, text = run(EXAMPLE, False)
    assert code == EXIT_OK
    assert "read_email->update_ticket  proven" in text
    assert "update_ticket->reply       proven" in text
    assert "checked at run time: post read_email: has_field:issue_id" in text
    assert text.rstrip().endswith("result: OK")


def test_a_refuted_edge_prints_its_counterexample_and_exits_1(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(BAD)
    code, text = run(path, False)
    assert code == EXIT_FAILED
    assert "a->b  refuted" in text and "counterexample: " in text
    assert "b->c  unproven" in text and "pattern" in text
    assert "result: FAILED (1 refuted, 1 unproven and not acknowledged)" in text


def test_json_output_carries_checked_counterexamples(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(BAD)
    code, text = run(path, True)
    body = json.loads(text)
    assert code == EXIT_FAILED and body["ok"] is False
    first = body["edges"][0]
    assert first["verdict"] == "refuted" and first["ok"] is False
    value = first["counterexample"]["value"]
    assert jsonschema.Draft202012Validator(
        {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}
    ).is_valid(value)
    assert not jsonschema.Draft202012Validator(
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    ).is_valid(value)


def test_acknowledging_the_unproven_edge_leaves_only_the_refuted_one_failing(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('acknowledge_unproven = ["b->c"]\n' + BAD)
    code, text = run(path, True)
    edges = json.loads(text)["edges"]
    assert code == EXIT_FAILED
    assert edges[1]["acknowledged"] is True and edges[1]["ok"] is True


def test_an_all_proven_or_acknowledged_pipeline_exits_0(tmp_path):
    path = tmp_path / "ok.toml"
    path.write_text(
        'name = "ok"\nacknowledge_unproven = ["b->c"]\n'
        + BAD.split("\n", 2)[2].replace('n = { type = "number" }', 'n = { type = "integer" }')
    )
    code, text = run(path, False)
    assert code == EXIT_OK, text
    assert "unproven (acknowledged)" in text


def test_an_invalid_file_exits_2_naming_the_field(tmp_path):
    path = tmp_path / "invalid.toml"
    path.write_text('name = "x"\n[[steps]]\nname = "a"\nkind = "robot"\n')
    code, text = run(path, False)
    assert code == EXIT_INVALID
    assert "$.steps[0].kind" in text
    code, text = run(path, True)
    assert code == EXIT_INVALID and json.loads(text)["violations"][0]["path"] == "$.steps[0].kind"
