"""Named API keys: declared per provider, named on a model call, counted by their own quota; a hostile or
malformed declaration is a typed error at load or at worker start that never quotes a secret."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.cli.workers import fingerprint
from agentsteps.client.quotas import quota_plan
from agentsteps.client.settings import load_settings, provider_keys
from agentsteps.contracts import AgentSpec, LLMConfig
from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
from agentsteps.contracts.errors import DeploymentConfigError, InvalidSpecError, QuotaConfigError
from agentsteps.contracts.quotas.config import QuotaSettings
from agentsteps.contracts.spec_check import check_spec
from agentsteps.worker import check_provider_keys, check_quota_keys

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

SECRET_A = "sk-acme-0123456789abcdef"
SECRET_B = "sk-globex-fedcba9876543210"

TWO_KEYS = """
[worker.providers.openai_keys]
acme = "OPENAI_KEY_ACME"
globex = "OPENAI_KEY_GLOBEX"

[[worker.quotas.limits]]
name = "gpt4o-acme"
model = "gpt-4o*"
api_key = "acme"
requests_per_minute = 500

[[worker.quotas.limits]]
name = "gpt4o-globex"
model = "gpt-4o*"
api_key = "globex"
requests_per_minute = 200

[[worker.quotas.limits]]
name = "gpt4o"
model = "gpt-4o*"
requests_per_minute = 100
"""

ENV = {"OPENAI_KEY_ACME": SECRET_A, "OPENAI_KEY_GLOBEX": SECRET_B}


def load(tmp_path, text: str, env: dict[str, str] | None = None) -> WorkerSettings:
    path = tmp_path / "agentsteps.toml"
    path.write_text(text)
    return load_settings(path, env=env or {})


def test_two_keys_load_route_calls_to_their_own_quota_and_resolve_their_secrets(tmp_path):
    settings = load(tmp_path, TWO_KEYS, ENV)
    plan = quota_plan(settings)
    assert plan is not None
    model = "gpt-4o-2024-08-06"
    assert plan.route("openai", model, "acme").quota == "gpt4o-acme"
    assert plan.route("openai", model, "globex").quota == "gpt4o-globex"
    assert plan.route("openai", model).quota == "gpt4o", "a call naming no key is the default key's, as before"
    assert plan.route("openai", model, "initech") is None
    assert settings.quotas.quota_for("openai", model, "globex").name == "gpt4o-globex"
    assert settings.providers.key_names("openai") == ["default", "acme", "globex"]
    assert settings.providers.key_names("anthropic") == ["default"]
    keys = provider_keys(settings, env=ENV)
    assert {name: s.get_secret_value() for name, s in keys["openai"].items()} == {"acme": SECRET_A, "globex": SECRET_B}
    assert SECRET_A not in repr(settings) and SECRET_A not in repr(keys), "secrets are SecretStr"


def test_a_default_key_call_and_plan_serialize_as_they_did_before_keys_existed(tmp_path):
    # Recorded histories hold plans and configs without a key: a default one must be the same bytes.
    assert "api_key" not in LLMConfig(model="gpt-4o-2024-08-06").model_dump_json()
    assert '"api_key":"acme"' in LLMConfig(model="gpt-4o-2024-08-06", api_key="acme").model_dump_json()
    plan = quota_plan(load(tmp_path, TWO_KEYS, ENV))
    default_route = next(r for r in plan.routes if r.quota == "gpt4o")
    assert "api_key" not in default_route.model_dump_json()


def test_a_secret_in_the_first_named_keys_secrets_folder_wins_over_the_environment(tmp_path):
    folder = tmp_path / "secrets"
    folder.mkdir()
    (folder / "OPENAI_KEY_ACME").write_text(SECRET_A + "\n")
    settings = load(tmp_path, TWO_KEYS, {"OPENAI_KEY_GLOBEX": SECRET_B}).model_copy(update={"secrets_dir": folder})
    assert provider_keys(settings, env={"OPENAI_KEY_GLOBEX": SECRET_B})["openai"]["acme"].get_secret_value() == SECRET_A


HOSTILE_KEYS = [
    ('acme = "OPENAI_KEY_ACME"', '"acme corp; DROP" = "OPENAI_KEY_ACME"', "API key name"),
    ('acme = "OPENAI_KEY_ACME"', f'{"k" * 65} = "OPENAI_KEY_ACME"', "API key name"),
    ('acme = "OPENAI_KEY_ACME"', 'default = "OPENAI_KEY_ACME"', "'default' is the openai key of OPENAI_API_KEY"),
    ('acme = "OPENAI_KEY_ACME"', 'acme = "OPENAI_KEY_GLOBEX"', "both read OPENAI_KEY_GLOBEX"),
    ('acme = "OPENAI_KEY_ACME"', 'acme = "OPENAI_API_KEY"', "reads OPENAI_API_KEY, the 'default' key"),
    ('acme = "OPENAI_KEY_ACME"', "acme = 7", "openai_keys"),
    ('acme = "OPENAI_KEY_ACME"', 'sk-live-abc = "OPENAI_KEY_ACME"', "looks like the key itself"),
]


@pytest.mark.parametrize(("good", "bad", "named"), HOSTILE_KEYS, ids=[h[1][:30] for h in HOSTILE_KEYS])
def test_a_hostile_or_malformed_key_declaration_is_refused_at_load_naming_the_field(tmp_path, good, bad, named):
    assert good in TWO_KEYS
    with pytest.raises(InvalidSpecError) as caught:
        load(tmp_path, TWO_KEYS.replace(good, bad, 1), ENV)
    assert named in str(caught.value), str(caught.value)
    assert "$.providers.openai_keys" in str(caught.value) or "$.quotas" in str(caught.value)


def test_a_secret_pasted_where_its_variable_belongs_is_refused_without_quoting_it(tmp_path):
    with pytest.raises(InvalidSpecError) as caught:
        load(tmp_path, TWO_KEYS.replace('"OPENAI_KEY_ACME"', f'"{SECRET_A}"', 1))
    assert "never the key itself" in str(caught.value)
    assert SECRET_A not in str(caught.value) and SECRET_A not in repr(caught.value.violations)


def test_a_duplicate_key_name_in_the_file_is_refused_at_load(tmp_path):
    with pytest.raises(InvalidSpecError, match="not valid TOML"):
        load(tmp_path, TWO_KEYS.replace('globex = "OPENAI_KEY_GLOBEX"', 'acme = "OPENAI_KEY_GLOBEX"', 1), ENV)


def test_a_quota_on_an_undeclared_key_is_a_quota_config_error_at_load_and_at_worker_start(tmp_path):
    with pytest.raises(QuotaConfigError) as caught:
        load(tmp_path, TWO_KEYS.replace('api_key = "globex"', 'api_key = "initech"', 1), ENV)
    message = str(caught.value)
    assert "'gpt4o-globex'" in message and "'initech'" in message and "declared: default, acme, globex" in message
    # Settings built in code skip the file's validation: the worker refuses them before it starts anything.
    in_code = WorkerSettings().model_copy(
        update={
            "quotas": QuotaSettings.model_validate(
                {"limits": [{"name": "q", "api_key": "initech", "requests_per_minute": 1}]}
            )
        }
    )
    with pytest.raises(QuotaConfigError, match="limits\\[0\\].api_key: quota 'q' counts openai key 'initech'"):
        check_quota_keys(in_code)
    with pytest.raises(QuotaConfigError, match="API key name"):
        load(tmp_path, TWO_KEYS.replace('api_key = "globex"', 'api_key = "*"', 1), ENV)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"OPENAI_KEY_ACME": SECRET_A}, "'globex' reads environment variable OPENAI_KEY_GLOBEX, which is not set"),
        ({**ENV, "OPENAI_KEY_GLOBEX": "  "}, "'globex' reads environment variable OPENAI_KEY_GLOBEX, which is not set"),
        ({**ENV, "OPENAI_KEY_GLOBEX": SECRET_A}, "keys 'acme' and 'globex' hold the same key"),
    ],
    ids=["unset", "blank", "one-secret-two-names"],
)
def test_a_worker_without_a_declared_keys_secret_refuses_to_start_naming_key_and_variable(
    tmp_path, monkeypatch, env, named
):
    settings = load(tmp_path, TWO_KEYS, env)
    for var in ENV:
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    # provider_keys is what every worker build calls; check_provider_keys is `agentsteps worker`'s start check.
    for check in (lambda: provider_keys(settings, env=env), lambda: check_provider_keys(settings)):
        with pytest.raises(DeploymentConfigError) as caught:
            check()
        assert named in str(caught.value), str(caught.value)
        assert SECRET_A not in str(caught.value) and SECRET_B not in str(caught.value)


def test_the_default_key_holding_a_named_keys_secret_is_refused():
    settings = WorkerSettings(
        providers=ProviderSettings(openai_api_key=SecretStr(SECRET_A), openai_keys={"acme": "OPENAI_KEY_ACME"})
    )
    with pytest.raises(DeploymentConfigError, match="keys 'default' and 'acme' hold the same key"):
        provider_keys(settings, env={"OPENAI_KEY_ACME": SECRET_A})


def test_a_model_naming_a_key_with_bad_characters_fails_the_spec_check_without_echoing_it():
    spec = AgentSpec(
        name="k",
        model=LLMConfig(model="gpt-4o-2024-08-06", api_key=SECRET_A),
        tools=[],
        fallback_models=[LLMConfig(model="gpt-4o-mini-2024-07-18", api_key="acme corp")],
    )
    violations = check_spec(spec, set())
    paths = {v.path for v in violations}
    assert {"$.model.api_key", "$.fallback_models[0].api_key"} <= paths, violations
    assert all(SECRET_A not in v.message for v in violations)
    assert (
        check_spec(
            spec.model_copy(
                update={"model": LLMConfig(model="gpt-4o-2024-08-06", api_key="acme"), "fallback_models": []}
            ),
            set(),
        )
        == []
    )


def test_the_worker_fingerprint_names_keys_but_never_their_secrets(tmp_path):
    plain = load(tmp_path, "")
    keyed = load(tmp_path, TWO_KEYS, ENV)
    other_secret = load(tmp_path, TWO_KEYS, {**ENV, "OPENAI_KEY_ACME": "sk-another-secret-value"})
    fewer = load(
        tmp_path,
        TWO_KEYS.replace('globex = "OPENAI_KEY_GLOBEX"\n', "")
        .replace('api_key = "globex"', 'api_key = "default"')
        .replace('name = "gpt4o"\nmodel = "gpt-4o*"', 'name = "o3"\nmodel = "o3*"'),
        ENV,
    )
    registry = ToolRegistry()
    assert fingerprint(plain, registry) == fingerprint(WorkerSettings(config_file=plain.config_file), registry)
    assert fingerprint(keyed, registry) != fingerprint(plain, registry), "key names are part of the configuration"
    assert fingerprint(keyed, registry) == fingerprint(other_secret, registry), "secrets are not"
    assert fingerprint(keyed, registry) != fingerprint(fewer, registry)
