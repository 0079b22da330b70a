"""CHANGELOG.md keeps up with the release: an entry for this version, in Keep a Changelog form, and every
versioned --json shape announced."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHANGELOG = (ROOT / "CHANGELOG.md").read_text()
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
pytestmark = pytest.mark.fast

SECTIONS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_this_version_has_an_entry_under_unreleased():
    releases = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", CHANGELOG, re.M)
    assert releases[0] == ("Unreleased", ""), "the newest heading is [Unreleased], where the next changes go"
    assert releases[1][0] == VERSION, f"pyproject says {VERSION}; CHANGELOG.md has no entry for it"
    assert all(date for _, date in releases[1:]), "every released version has its date"


def test_only_keep_a_changelog_sections():
    used = set(re.findall(r"^### (.+)$", CHANGELOG, re.M))
    assert used <= SECTIONS, used - SECTIONS


def test_every_versioned_json_shape_is_announced():
    shapes = json.loads((ROOT / "tests" / "client_cli" / "cli_json_released.json").read_text())
    for shape in shapes:
        assert shape in CHANGELOG, f"{shape} is versioned but CHANGELOG.md never announced it"
