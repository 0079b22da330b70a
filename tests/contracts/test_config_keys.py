"""A config key the worker does not define fails at start-up, named, instead of being silently ignored.

A misspelt key (``s3_bukcet``) or one removed in a new release would otherwise
leave the worker running on a default the operator never chose.
"""

from __future__ import annotations

import pytest

from agentsteps.client.settings import load_settings
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.errors import InvalidSpecError

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    "toml, path",
    [
        ('[worker]\ntask_queu = "q"\n', "$.task_queu"),
        ('[worker.payload_store]\ns3_bukcet = "b"\n', "$.payload_store.s3_bukcet"),
        ('[worker.providers]\nopenai_base = "http://x"\n', "$.providers.openai_base"),
        ('[worker.tracing]\nendpoint = "http://x"\n', "$.tracing.endpoint"),
        ("[worker.prices]\ninput = {}\n", "$.prices.input"),
    ],
)
def test_an_unknown_key_in_any_section_is_a_config_error_naming_it(tmp_path, toml, path):
    config = tmp_path / "agentsteps.toml"
    config.write_text(toml)
    with pytest.raises(InvalidSpecError) as caught:
        load_settings(config, env={})
    assert [v.path for v in caught.value.violations] == [path]


def test_the_known_keys_still_load(tmp_path):
    config = tmp_path / "agentsteps.toml"
    config.write_text(
        '[worker]\ntask_queue = "q"\n[worker.payload_store]\ns3_bucket = "b"\n'
        '[mcp.servers.tickets]\ntransport = "http"\nurl = "http://tickets:8765/mcp"\n'
    )
    settings = load_settings(config, env={})
    assert settings.task_queue == "q" and settings.payload_store.s3_bucket == "b"


def test_settings_round_trip_through_json_as_worker_processes_receive_them():
    settings = WorkerSettings(task_queue="q")
    assert WorkerSettings.model_validate_json(settings.model_dump_json()).task_queue == "q"
