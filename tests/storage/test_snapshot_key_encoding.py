"""One encoding for a snapshot key, in the key file or the environment; a malformed key is a clear error."""

from __future__ import annotations

import pytest

from agentsteps.activities.sandbox.snapshots import (
    KEY_FILE,
    SnapshotVault,
    load_snapshot_key,
    previous_snapshot_keys,
)
from agentsteps.client.settings import load_settings
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.errors import DeploymentConfigError
from agentsteps.storage.payload_store import LocalDirStorageDriver, PayloadStore

pytestmark = pytest.mark.fast


def _vault(settings: WorkerSettings, store: PayloadStore) -> SnapshotVault:
    return SnapshotVault(store, load_snapshot_key(settings), previous_snapshot_keys(settings))


async def test_moving_the_key_file_into_the_environment_keeps_every_paused_program_loadable(tmp_path):
    store = PayloadStore(LocalDirStorageDriver(tmp_path / "payloads"))
    on_disk = WorkerSettings(state_dir=tmp_path / "state")
    ref = await _vault(on_disk, store).save("run-1", b"paused program")
    text = (tmp_path / "state" / KEY_FILE).read_text()
    # The operator copies the file into a Secret (a trailing newline included) and drops the file.
    in_env = load_settings(
        None, {"AGENTSTEPS_SNAPSHOT_KEY": text + "\n", "AGENTSTEPS_STATE_DIR": str(tmp_path / "new")}
    )
    vault = _vault(in_env, store)
    assert await vault.load("run-1", ref) == b"paused program"
    assert (await vault.save("run-1", b"x")).key_id == ref.key_id, "the same key, so the same key id"


async def test_what_an_earlier_release_signed_with_the_hex_decoded_key_file_still_loads(tmp_path):
    store = PayloadStore(LocalDirStorageDriver(tmp_path / "payloads"))
    settings = WorkerSettings(state_dir=tmp_path / "state")
    load_snapshot_key(settings)  # creates the file
    text = (tmp_path / "state" / KEY_FILE).read_text()
    legacy = await SnapshotVault(store, bytes.fromhex(text.strip())).save("run-1", b"paused before the upgrade")
    assert await _vault(settings, store).load("run-1", legacy) == b"paused before the upgrade"
    env = load_settings(None, {"AGENTSTEPS_SNAPSHOT_KEY": text, "AGENTSTEPS_STATE_DIR": str(tmp_path / "elsewhere")})
    assert await _vault(env, store).load("run-1", legacy) == b"paused before the upgrade"


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "   ",
        "short-key",
        "two-line-key-0123\n456789abcdef",
        "key-with-\x00-nul-0123456789",
        "ключ-не-ascii-0123456789",
    ],
)
def test_a_malformed_key_is_a_clear_error_naming_the_variable_never_the_key(tmp_path, bad):
    settings = WorkerSettings(state_dir=tmp_path, snapshot_key=bad)
    with pytest.raises(DeploymentConfigError, match="AGENTSTEPS_SNAPSHOT_KEY") as raised:
        load_snapshot_key(settings)
    assert "malformed" in str(raised.value)
    if bad.strip():
        assert bad.strip() not in str(raised.value)


def test_a_malformed_key_file_and_a_malformed_previous_key_are_named_too(tmp_path):
    (tmp_path / KEY_FILE).write_text("tiny\n")
    with pytest.raises(DeploymentConfigError, match=KEY_FILE):
        load_snapshot_key(WorkerSettings(state_dir=tmp_path))
    settings = WorkerSettings(
        state_dir=tmp_path, snapshot_key="good-key-0123456789abcdef", snapshot_previous_keys=["old-key-0123456789", "x"]
    )
    with pytest.raises(DeploymentConfigError, match=r"PREVIOUS_KEYS \(entry 2\)"):
        previous_snapshot_keys(settings)
