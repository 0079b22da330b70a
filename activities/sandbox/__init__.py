"""The Monty sandbox driver: code-mode programs run here, never in a workflow."""

from .activities import SandboxActivities
from .checker import check_program
from .pool import SandboxPool
from .snapshots import SnapshotVault, load_snapshot_key

__all__ = [
    "SandboxActivities",
    "SandboxPool",
    "SnapshotVault",
    "check_program",
    "load_snapshot_key",
]
