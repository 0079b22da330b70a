"""The whole package is type-clean under ``mypy --strict``, with no baseline.

Configured once, in ``pyproject.toml`` (``[tool.mypy]``: ``packages = ["agentsteps"]``; the folders
of the repository that are not the package, ``tests/``, ``bench/`` and ``deploy/``, are excluded).
The repository root is the ``agentsteps`` package, so mypy reads it through a link named
``agentsteps`` in a directory outside the repository (kept between runs, with mypy's cache, so a
re-run checks only what changed). That the installed wheel gives a user's type checker these types
(``py.typed``) is proven in ``tests/e2e/test_wheel_install.py``; which names are public is
``tests/repo/test_exported_members.py``'s.

The two mypy runs carry the ``typecheck`` marker: ``make typecheck`` runs them (``.ci/run``, between
the lint and the suite), ``make test`` leaves them out.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def _source_link() -> Path:
    home = Path(tempfile.gettempdir()) / f"agentsteps-typecheck-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]}"
    home.mkdir(exist_ok=True)
    link = home / "agentsteps"
    if not link.is_symlink() or link.resolve() != ROOT:
        link.unlink(missing_ok=True)
        link.symlink_to(ROOT, target_is_directory=True)
    return home


@pytest.mark.typecheck
def test_the_package_passes_mypy_strict():
    home = _source_link()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(home / "cache"),
        ],
        cwd=home,
        capture_output=True,
        text=True,
        timeout=280,
    )

    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert done.stdout.startswith("Success: no issues found"), done.stdout


@pytest.mark.typecheck
def test_the_dashboard_builder_is_type_clean_against_grafanas_typed_builders():
    grafana = ROOT / "deploy" / "grafana"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-namespace-packages",
            "--cache-dir",
            str(_source_link() / "cache-grafana"),
            "build_dashboard.py",
            "dashboard_kit.py",
            "dashboard_rows.py",
        ],
        cwd=grafana,
        capture_output=True,
        text=True,
        timeout=280,
    )

    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_mypy_checks_every_package_folder_strictly():
    assert CONFIG["strict"] is True
    assert CONFIG["packages"] == ["agentsteps"] and "modules" not in CONFIG
    shipped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    excluded = [p for p in shipped if re.search(CONFIG["exclude"][0], p.replace(".", "/") + "/__init__.py")]
    assert not excluded, f"mypy skips package folders: {excluded}"
    for folder in ("tests", "bench", "deploy"):  # in the repository, not in the package
        assert re.search(CONFIG["exclude"][0], f"agentsteps/{folder}/x.py")


def test_the_package_ships_its_type_marker():
    assert (ROOT / "py.typed").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["agentsteps"]
