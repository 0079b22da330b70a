"""What deploy/ runs exists, and the image is the wheel run as a non-root user.

Every container that runs the agentsteps image, in the Dockerfile, the compose
file and the Kubernetes manifests, gets its command line resolved the way the
runtime does (compose ``entrypoint``/``command`` and Kubernetes
``command``/``args`` replace the image's ``ENTRYPOINT``/``CMD``), and that
command line is parsed by the program's real argparse tree: the ``agentsteps``
CLI or the ticket tracker. A renamed command or flag fails here, not in a
cluster. The image is never built (Docker may be unusable here): the Dockerfile
is read.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shlex
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from agentsteps.cli.main import _parser as agentsteps_parser
from agentsteps.examples.tickets.__main__ import build_parser as tickets_parser

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
IMAGE = f"agentsteps-worker:{VERSION}"

pytestmark = pytest.mark.fast

# The programs the image can run, by the argv prefix that starts them.
PROGRAMS: dict[tuple[str, ...], argparse.ArgumentParser] = {
    ("agentsteps",): agentsteps_parser(),
    ("python", "-m", "agentsteps.examples.tickets"): tickets_parser(),
}


# --- the Dockerfile, read as Docker reads it -------------------------------------


@dataclass
class Stage:
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]

    def last(self, keyword: str) -> str | None:
        found = self.all(keyword)
        return found[-1] if found else None


def dockerfile_stages(text: str) -> list[Stage]:
    logical = re.sub(r"\\\n", " ", text)  # line continuations
    stages: list[Stage] = []
    for line in logical.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            named = re.search(r"\s+AS\s+(\S+)$", args, re.I)
            stages.append(Stage(named.group(1) if named else None))
        assert stages, "an instruction before FROM"
        stages[-1].instructions.append((keyword, args))
    return stages


def exec_form(args: str | None) -> list[str]:
    assert args is not None
    parsed = json.loads(args)  # the shell form would run through /bin/sh and swallow SIGTERM
    assert isinstance(parsed, list) and all(isinstance(a, str) for a in parsed), args
    return parsed


IMAGE_STAGE = dockerfile_stages((DEPLOY / "Dockerfile").read_text())[-1]
IMAGE_ENTRYPOINT = exec_form(IMAGE_STAGE.last("ENTRYPOINT"))
IMAGE_CMD = exec_form(IMAGE_STAGE.last("CMD"))


# --- resolving and checking a container's command line ---------------------------


def effective_argv(*, entrypoint: list[str] | None, command: list[str] | None) -> list[str]:
    """Docker and Kubernetes alike: a new entrypoint drops the image's CMD as well."""
    if entrypoint is not None:
        return [*entrypoint, *(command or [])]
    return [*IMAGE_ENTRYPOINT, *(IMAGE_CMD if command is None else command)]


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    found = {o for action in parser._actions for o in action.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _option_strings(sub)
    return found


def argv_problem(argv: list[str]) -> str | None:
    """None when ``argv`` starts a program of the image and its parser accepts the rest; else why not.

    Flags must be spelled out: argparse takes ``--seed-issue`` for ``--seed-issues``,
    which breaks the day another flag shares the prefix.
    """
    for prefix, parser in PROGRAMS.items():
        if tuple(argv[: len(prefix)]) == prefix:
            known = _option_strings(parser)
            abbreviated = [a for a in argv[len(prefix) :] if a.startswith("--") and a.split("=")[0] not in known]
            if abbreviated:
                return f"{shlex.join(argv)}: not a flag of this program (spell it out): {', '.join(abbreviated)}"
            stderr = io.StringIO()
            try:
                with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
                    parser.parse_args(argv[len(prefix) :])
            except SystemExit as exc:
                return f"{shlex.join(argv)}: exit {exc.code}: {stderr.getvalue().strip()}"
            return None
    return f"{shlex.join(argv)}: not a program the image has ({', '.join(' '.join(p) for p in PROGRAMS)})"


def _as_list(value: str | list[str] | None) -> list[str] | None:
    return shlex.split(value) if isinstance(value, str) else value


def compose_commands() -> Iterator[tuple[str, list[str]]]:
    services = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())["services"]
    for name, service in services.items():
        if service.get("image", "").startswith("agentsteps-worker:"):
            yield (
                f"compose {name}",
                effective_argv(
                    entrypoint=_as_list(service.get("entrypoint")), command=_as_list(service.get("command"))
                ),
            )


def k8s_documents() -> Iterator[tuple[Path, dict]]:
    for path in sorted(DEPLOY.glob("k8s*/*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield path, doc


def _pod_specs(node: object) -> Iterator[dict]:
    if isinstance(node, dict):
        if "containers" in node:
            yield node
        for value in node.values():
            yield from _pod_specs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _pod_specs(value)


def k8s_containers() -> Iterator[tuple[str, dict, dict]]:
    for path, doc in k8s_documents():
        for pod in _pod_specs(doc):
            for container in [*pod.get("initContainers", []), *pod["containers"]]:
                yield f"{path.relative_to(DEPLOY)} {doc['kind']}/{container['name']}", pod, container


def k8s_commands() -> Iterator[tuple[str, list[str]]]:
    for where, _, container in k8s_containers():
        if container["image"].startswith("agentsteps-worker:"):
            yield where, effective_argv(entrypoint=container.get("command"), command=container.get("args"))


ALL_COMMANDS = [*compose_commands(), *k8s_commands(), ("Dockerfile", effective_argv(entrypoint=None, command=None))]


# --- the tests -------------------------------------------------------------------


@pytest.mark.parametrize("where, argv", ALL_COMMANDS, ids=[w for w, _ in ALL_COMMANDS])
def test_every_command_deploy_runs_is_accepted_by_the_real_cli(where, argv):
    assert argv_problem(argv) is None, f"{where}: {argv_problem(argv)}"


def test_the_deploy_files_run_the_worker_and_the_tracker():
    started = {tuple(argv[:3]) for _, argv in ALL_COMMANDS}
    assert ("agentsteps", "worker") in {s[:2] for s in started}
    assert ("python", "-m", "agentsteps.examples.tickets") in started
    assert len([w for w, _ in ALL_COMMANDS if w.startswith("deploy/") or "k8s" in w]) >= 1


@pytest.mark.parametrize(
    "argv",
    [
        ["agentsteps", "wroker"],
        ["agentsteps", "worker", "--no-such-flag"],
        ["python", "-m", "agentsteps.examples.tickets", "--db", "x.db", "--seed-issue", "5"],  # abbreviated
        ["agentsteps", "payloads", "gc"],  # --older-than is required
        ["python", "-m", "agentsteps.examples.tickets", "--transport", "carrier-pigeon", "--db", "x.db"],
        ["python", "-m", "agentsteps.examples.ticket", "--db", "x.db"],
        ["sh", "-c", "agentsteps worker"],
    ],
)
def test_the_check_refuses_a_command_or_flag_that_does_not_exist(argv):
    assert argv_problem(argv) is not None


def test_the_image_installs_the_built_wheel_and_not_the_source_tree():
    stages = dockerfile_stages((DEPLOY / "Dockerfile").read_text())
    assert len(stages) >= 2, "a build stage for the wheel, then the image"
    builder = {s.name: s for s in stages}[re.search(r"--from=(\S+)", " ".join(IMAGE_STAGE.all("COPY"))).group(1)]  # type: ignore[union-attr]
    assert any("python -m build --wheel" in run for run in builder.all("RUN"))
    copies = IMAGE_STAGE.all("COPY") + IMAGE_STAGE.all("ADD")
    assert copies and all(c.startswith("--from=") for c in copies), f"the image copies from the context: {copies}"
    installs = [run for run in IMAGE_STAGE.all("RUN") if "pip install" in run]
    assert installs and all(".whl" in run for run in installs), installs
    assert not any(re.search(r"pip install[^&]*\s(-e|--editable)\b", run) for run in installs)


def test_the_image_runs_as_the_non_root_user_the_manifests_expect():
    user = IMAGE_STAGE.last("USER")
    assert user is not None and user.isdigit() and int(user) != 0, f"USER {user}: numeric and not root"
    assert any(f"--uid {user}" in run for run in IMAGE_STAGE.all("RUN"))
    pods = [pod for _, pod, c in k8s_containers() if c["image"].startswith("agentsteps-worker:")]
    assert pods
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == int(user)


def test_the_named_volumes_the_image_mounts_are_writable_by_its_user():
    user = IMAGE_STAGE.last("USER")
    owned = set(re.findall(rf"install -d -o {user} -g {user} (\S+)", " ".join(IMAGE_STAGE.all("RUN"))))
    services = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())["services"]
    mounts = [
        (name, volume.split(":")[1])
        for name, service in services.items()
        if service.get("image", "").startswith("agentsteps-worker:")
        for volume in service.get("volumes", [])
        if not volume.startswith((".", "/"))
    ]
    assert mounts, "the tracker keeps its database on a named volume"
    for name, target in mounts:
        # A new named volume takes the owner of the image's directory: root, unless the image made it the user's.
        assert target in owned or target.startswith("/home/agentsteps/"), f"{name}: {target} is root's in the image"


def test_every_image_reference_is_this_version():
    references = [
        s["image"]
        for s in yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())["services"].values()
        if s["image"].startswith("agentsteps-worker:")
    ]
    references += [c["image"] for _, _, c in k8s_containers() if c["image"].startswith("agentsteps-worker:")]
    references += re.findall(r"agentsteps-worker:[\w.-]+", (DEPLOY / "Dockerfile").read_text())
    assert references and set(references) == {IMAGE}


def test_the_build_context_keeps_what_the_wheel_needs():
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for needed in ("pyproject.toml", "README.md", "py.typed", "scripted_model", "examples"):
        assert needed not in ignored
