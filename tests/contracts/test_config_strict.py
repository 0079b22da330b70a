"""Config is read strictly: numbers are numbers, and every cross-reference is checked at load.

A quoted ``"500"`` or a ``true`` where a count belongs is a typed config error
naming the key path, never 500 or one a minute; a ``degrade_to`` entry naming
a key or provider the worker cannot use fails the worker's start, not the first
run that degrades. Environment variables are text by nature and are typed by
the field they set.
"""

from __future__ import annotations

import pytest

from agentsteps.client.settings import load_mcp_config, load_settings
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.errors import InvalidSpecError, QuotaConfigError
from agentsteps.contracts.mcp import McpConfigError
from agentsteps.contracts.quotas.config import QuotaSettings
from agentsteps.worker import check_quota_keys

pytestmark = pytest.mark.fast

LIMIT = '[[worker.quotas.limits]]\nname = "gpt4o"\nmodel = "gpt-4o*"\n'
TENANT = '[[worker.quotas.tenants]]\nname = "acme"\n'


def _load(tmp_path, toml: str, env: dict[str, str] | None = None) -> WorkerSettings:
    config = tmp_path / "agentsteps.toml"
    config.write_text(toml)
    return load_settings(config, env=env or {})


@pytest.mark.parametrize(
    "toml, error, path",
    [
        (LIMIT + 'requests_per_minute = "500"\n', QuotaConfigError, "$.quotas.limits[0].requests_per_minute"),
        (LIMIT + "requests_per_minute = true\n", QuotaConfigError, "$.quotas.limits[0].requests_per_minute"),
        (LIMIT + "requests_per_minute = 500.5\n", QuotaConfigError, "$.quotas.limits[0].requests_per_minute"),
        (
            LIMIT + 'requests_per_minute = 5\nlease_seconds = "60"\n',
            QuotaConfigError,
            "$.quotas.limits[0].lease_seconds",
        ),
        (TENANT + 'weight = "2"\n', QuotaConfigError, "$.quotas.tenants[0].weight"),
        (
            TENANT + '[worker.quotas.tenants.budget.day]\ntokens_hard = "1000"\n',
            QuotaConfigError,
            "$.quotas.tenants[0].budget.day.tokens_hard",
        ),
        (TENANT + "[worker.quotas.tenants.budget.day]\nusd_hard = false\n", QuotaConfigError, None),
        ('[worker]\ndev_port = "7233"\n', InvalidSpecError, "$.dev_port"),
        ("[worker]\nsingle_worker = 1\n", InvalidSpecError, "$.single_worker"),
        ("[worker]\nnamespace = 1979-05-27\n", InvalidSpecError, "$.namespace"),
        (
            '[worker.prices]\ninput_per_mtok = { "gpt-4o" = "2.5" }\n',
            InvalidSpecError,
            '$.prices.input_per_mtok["gpt-4o"]',
        ),
        (
            '[worker.providers]\nrequest_timeout_seconds = "30"\n',
            InvalidSpecError,
            "$.providers.request_timeout_seconds",
        ),
        ('[worker]\nrequired_providers = "openai"\n', InvalidSpecError, "$.required_providers"),
    ],
)
def test_a_value_of_the_wrong_type_is_a_typed_config_error_naming_its_key_path(tmp_path, toml, error, path):
    with pytest.raises(error) as caught:
        _load(tmp_path, toml)
    paths = [v.path for v in caught.value.violations]
    assert len(paths) == 1, paths
    if path is not None:
        assert paths == [path]
    assert "Input should be a valid" in str(caught.value)


def test_numbers_where_numbers_belong_load_and_an_integer_is_a_float_where_a_float_belongs(tmp_path):
    settings = _load(
        tmp_path,
        LIMIT + "requests_per_minute = 500\nlease_seconds = 60\n" + TENANT + "weight = 2\n"
        "[worker.quotas.tenants.budget.day]\ntokens_hard = 1000\nusd_hard = 5\n",
    )
    assert settings.quotas.limits[0].requests_per_minute == 500
    assert settings.quotas.tenants[0].weight == 2.0 and settings.quotas.tenants[0].budget["day"].usd_hard == 5.0


def test_environment_variables_are_typed_by_the_field_they_set_and_refused_when_they_cannot_be(tmp_path):
    env = {
        "AGENTSTEPS_DEV_PORT": "7300",
        "AGENTSTEPS_SINGLE_WORKER": "true",
        "AGENTSTEPS_GRACEFUL_SHUTDOWN_SECONDS": "30",
        "OPENAI_API_KEY": "sk-test-1234",
        "AGENTSTEPS_REQUIRED_PROVIDERS": "openai",
    }
    settings = _load(tmp_path, '[worker]\ntask_queue = "q"\n', env)
    assert (settings.dev_port, settings.single_worker, settings.graceful_shutdown_seconds) == (7300, True, 30.0)
    assert settings.providers.openai_api_key is not None
    assert settings.providers.openai_api_key.get_secret_value() == "sk-test-1234", "a secret is never re-typed"
    with pytest.raises(InvalidSpecError) as caught:
        _load(tmp_path, "[worker]\n", {"AGENTSTEPS_DEV_PORT": "seventy"})
    assert [v.path for v in caught.value.violations] == ["$.dev_port"]


def test_a_degrade_to_entry_naming_an_undeclared_key_fails_at_load_naming_the_entry(tmp_path):
    toml = TENANT + '[[worker.quotas.tenants.degrade_to]]\nmodel = "gpt-4o-mini-2024-07-18"\napi_key = "globex"\n'
    with pytest.raises(QuotaConfigError) as caught:
        _load(tmp_path, toml)
    assert "tenants[0].degrade_to[0].api_key" in str(caught.value) and "'globex'" in str(caught.value)
    declared = '[worker.providers.openai_keys]\nglobex = "OPENAI_KEY_GLOBEX"\n' + toml
    assert _load(tmp_path, declared).quotas.tenants[0].degrade_to[0].api_key == "globex"


def test_a_degrade_to_provider_the_worker_is_not_deployed_for_fails_at_load(tmp_path):
    toml = (
        '[worker]\nrequired_providers = ["openai"]\n'
        + TENANT
        + '[[worker.quotas.tenants.degrade_to]]\nprovider = "anthropic"\nmodel = "claude-3-5-haiku-20241022"\n'
    )
    with pytest.raises(QuotaConfigError) as caught:
        _load(tmp_path, toml)
    assert "tenants[0].degrade_to[0].provider" in str(caught.value) and "required_providers" in str(caught.value)


def test_settings_built_in_code_are_cross_checked_when_the_worker_starts():
    quotas = QuotaSettings.model_validate(
        {"tenants": [{"name": "acme", "degrade_to": [{"model": "gpt-4o-mini-2024-07-18", "api_key": "globex"}]}]}
    )
    with pytest.raises(QuotaConfigError, match=r"tenants\[0\]\.degrade_to\[0\]\.api_key"):
        check_quota_keys(WorkerSettings().model_copy(update={"quotas": quotas}))  # as a backend's code may


@pytest.mark.parametrize(
    "table, key",
    [
        ('url = "http://t/mcp"\ntransport = "http"\nrequired = "yes"\n', "required"),
        ('url = "http://t/mcp"\ntransport = "http"\nmax_concurrent_calls = "16"\n', "max_concurrent_calls"),
    ],
)
def test_an_mcp_server_table_is_as_strict_as_the_worker_table(tmp_path, table, key):
    config = tmp_path / "agentsteps.toml"
    config.write_text("[mcp.servers.tickets]\n" + table)
    with pytest.raises(McpConfigError, match=rf"mcp\.servers\.tickets\.[a-z.]*{key}"):
        load_mcp_config(config)
