"""Every code block in the README and docs/ is one a reader can use as written.

Fast checks here (no server); ``test_first_hour.py`` runs every python and sh block against a fresh clone's
``agentsteps dev``.
"""

from __future__ import annotations

import ast
import json
import tomllib

import pytest
import yaml
from first_hour_support import PARSED, READ, RUN, doc_blocks

pytestmark = pytest.mark.fast
BLOCKS = doc_blocks()


def test_every_block_says_its_language():
    unknown = [f"{b.where} ```{b.lang}" for b in BLOCKS if b.lang not in RUN | PARSED | READ]
    assert unknown == [], "tag each block with one of " + ", ".join(sorted(RUN | PARSED | READ))


def test_a_block_is_left_unrun_only_with_a_reason():
    assert [b.where for b in BLOCKS if b.not_run is not None and (b.lang not in RUN or not b.not_run)] == []


@pytest.mark.parametrize(
    "block", [b for b in BLOCKS if b.lang == "python" and b.not_run is None], ids=lambda b: b.where
)
def test_python_blocks_are_whole_programs(block):
    compile(block.body, block.where, "exec")  # a top-level `await` is a SyntaxError, as in `python file.py`
    assert "temporal:7233" not in block.body
    if "await" in block.body:
        assert "asyncio.run(" in block.body or "run_and_exit(" in block.body, (
            "async code needs its asyncio.run(main()) (or run_and_exit(main())) to run as written"
        )


@pytest.mark.parametrize(
    "block", [b for b in BLOCKS if b.lang == "python" and b.not_run is not None], ids=lambda b: b.where
)
def test_python_fragments_left_unrun_still_parse(block):
    assert ast.parse(block.body).body


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang in PARSED], ids=lambda b: b.where)
def test_config_blocks_parse(block):
    {"toml": tomllib.loads, "json": json.loads, "yaml": yaml.safe_load}[block.lang](block.body)
