"""Pointing an agent at any endpoint (docs/metrics.md is silent; README "Models, gateways and
keys"): `[models.X] id, api_base, api_key_env` reach each agent CLI in its own way, only the
model's own key variable is required and passed, and only the name an agent calls the model by
is part of its runs' keys.

The real CLIs run against the scripted model server started here as a "gateway" that demands
a key: a request that does not carry the key llmtt mapped from `GW_KEY` is refused with 401, so
a passing run proves the mapping, and the server's log shows the name each agent sent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import CLI_AGENTS, GIT_TOML, Project, cli_project

from llmtt.agents.registry import make_agent
from llmtt.plan.runs import build_plan
from llmtt.providers import missing_key, resolve_model
from llmtt.scripted.server import ScriptedServer
from llmtt.spec.config import ModelSpec
from llmtt.spec.project import load_project
from llmtt.spec.selection import Selection

SCENARIO = """\
task: {prompt: Make a git repository here.}
run: {timeout_secs: 90}
solution: [git init -q .]
evaluation:
  gates:
    - {type: file_exists, path: .git/HEAD}
"""
GATEWAY_KEY = "gw-7f3a9c-not-a-real-key"
PROVIDER_KEYS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "OPENROUTER_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_GENERATIVE_AI_API_KEY",
)


def _gateway_toml(url: str) -> str:
    return f"""
[models.house]
id = "house-model-v2"
litellm = "openai/house-model-v2"
api_base = "{url}/v1"
api_key_env = "GW_KEY"
input_usd_per_mtok = 1.0
output_usd_per_mtok = 4.0
"""


def test_every_agent_reaches_a_gateway_with_the_key_its_model_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in PROVIDER_KEYS:  # no provider key anywhere: none may be asked for
        monkeypatch.delenv(name, raising=False)
    log = tmp_path / "gateway.log"
    with ScriptedServer(["git init -q ."], log=log, api_key=GATEWAY_KEY) as gateway:
        project = cli_project(tmp_path / "proj", _gateway_toml(gateway.url))
        project.write("scenarios/s.yaml", SCENARIO)
        result = project.doit(
            "run",
            "-n",
            "2",
            f"agent={','.join(CLI_AGENTS)}",
            "model=house",
            env={"LLMTT_ENABLED": "1", "GW_KEY": GATEWAY_KEY},
            timeout=600,
        )
    assert result.code == 0, result.out + result.err
    requests = [json.loads(line) for line in log.read_text().split("\n") if line]
    assert requests, "no agent reached the gateway"
    # Every request carried the mapped key (a 401 would be logged) and the gateway's own name.
    assert {r["status"] for r in requests} == {200}
    assert {r["model"] for r in requests} == {"house-model-v2"}
    for agent in CLI_AGENTS:
        run = project.json(f"s/{agent}-house/r1/run.json")
        assert run["status"] == "completed", (agent, run)
        metrics = project.json(f"s/{agent}-house/r1/metrics.json")
        assert metrics["outcome"] == "pass", (agent, metrics)
        # The user's price for the gateway's model, not a client's default.
        assert metrics["cost_source"] == "user", agent
        assert metrics["cost_usd"] > 0, agent
        # The key never reaches an artifact.
        for path in (project.results() / f"s/{agent}-house/r1").rglob("*"):
            if path.is_file():
                assert GATEWAY_KEY.encode() not in path.read_bytes(), path


def _project(tmp_path: Path, models: str) -> Project:
    project = cli_project(tmp_path / "proj", models)
    project.write("scenarios/s.yaml", SCENARIO)
    return project


@pytest.mark.parametrize(
    ("agent", "model", "env", "expected"),
    [
        # opencode asks only for the key of the provider its model names.
        ("opencode", "anthropic/claude-sonnet-4-5", {"OPENAI_API_KEY": "x"}, "ANTHROPIC_API_KEY"),
        ("opencode", "anthropic/claude-sonnet-4-5", {"ANTHROPIC_API_KEY": "x"}, None),
        ("opencode", "openrouter/qwen/qwen3-coder", {}, "OPENROUTER_API_KEY"),
        # A provider llmtt does not know: opencode itself says what it lacks.
        ("opencode", "ollama/qwen3", {}, None),
        (
            "claude-code",
            "sonnet",
            {"OPENAI_API_KEY": "x"},
            "ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN or CLAUDE_CODE_OAUTH_TOKEN",
        ),
        ("codex", "gpt-5", {"ANTHROPIC_API_KEY": "x"}, "OPENAI_API_KEY or CODEX_API_KEY"),
        # A model with its own key variable needs that one, and no provider's.
        ("claude-code", "house", {"ANTHROPIC_API_KEY": "x"}, "GW_KEY"),
        ("opencode", "house", {"OPENAI_API_KEY": "x"}, "GW_KEY"),
        ("codex", "house", {"GW_KEY": "k"}, None),
        # A gateway given without a key variable may need none.
        ("claude-code", "local", {}, None),
        ("codex", "local", {}, None),
        ("opencode", "local", {}, None),
    ],
)
def test_only_the_models_own_key_is_required(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    agent: str,
    model: str,
    env: dict[str, str],
    expected: str | None,
) -> None:
    for name in (*PROVIDER_KEYS, "GW_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    project = _project(
        tmp_path,
        '\n[models.house]\napi_key_env = "GW_KEY"\n'
        '\n[models.local]\napi_base = "http://127.0.0.1:9/v1"\n',
    )
    loaded = load_project(project.root)
    said = make_agent(loaded.config, loaded.root, agent).unavailable(model)
    if expected is None:
        assert said is None
    else:
        assert said is not None and f"needs {expected} for model {model!r}" in said
        if expected == "GW_KEY":
            assert "[models.house] api_key_env" in said


def test_an_agent_is_given_its_models_key_and_no_other_providers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "anthropic-key")
    monkeypatch.setenv("OPENAI_API_KEY", "openai-key")
    monkeypatch.setenv("GW_KEY", "gw-key")
    project = load_project(_project(tmp_path, '\n[models.house]\napi_key_env = "GW_KEY"\n').root)
    opencode = make_agent(project.config, project.root, "opencode")
    assert opencode.passed_env("anthropic/claude-sonnet-4-5") == {
        "ANTHROPIC_API_KEY": "anthropic-key"
    }
    assert opencode.passed_env("house") == {"GW_KEY": "gw-key"}
    assert opencode.passed_env("scripted") == {}
    assert make_agent(project.config, project.root, "codex").passed_env("gpt-5") == {
        "OPENAI_API_KEY": "openai-key"
    }


def test_claude_codes_bearer_token_is_stood_in_for_as_its_api_key_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model gateway takes claude-code's place with Anthropic for an API key (x-api-key)
    and, failing one, a bearer token (Authorization); either way every credential variable of
    claude-code is kept from the agent. claude.ai's own login alone stays claude-code's."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    project = load_project(_project(tmp_path, "").root)
    claude = make_agent(project.config, project.root, "claude-code")
    assert claude.own_provider("claude-sonnet-4-5", {"CLAUDE_CODE_OAUTH_TOKEN": "o"}) is None
    token = claude.own_provider("claude-sonnet-4-5", {"ANTHROPIC_AUTH_TOKEN": "t"})
    assert token is not None and (token.key, token.header) == ("t", "authorization")
    assert token.base_url == "http://127.0.0.1:9"
    assert set(token.secrets) == {
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
    }
    both = claude.own_provider("m", {"ANTHROPIC_AUTH_TOKEN": "t", "ANTHROPIC_API_KEY": "k"})
    assert both is not None and (both.key, both.header) == ("k", "x-api-key")


def _agent_keys(project: Project, agent: str) -> dict[str, str]:
    plan = build_plan(load_project(project.root), Selection(agents=(agent,), models=("house",)))
    return {run.run_id: json.dumps(run.agent_key, sort_keys=True) for run in plan.runs}


def test_only_the_name_an_agent_calls_a_model_by_is_in_its_key(tmp_path: Path) -> None:
    project = _project(tmp_path, "\n[models.house]\n")
    base = {a: _agent_keys(project, a) for a in ("claude-code", "litellm")}
    # Neither a gateway, a key variable nor a price makes a run of another model.
    toml = (project.root / "llmtt.toml").read_text()
    project.write(
        "llmtt.toml",
        toml
        + 'api_base = "http://127.0.0.1:9/v1"\napi_key_env = "GW_KEY"\n'
        + "input_usd_per_mtok = 1.0\noutput_usd_per_mtok = 2.0\n",
    )
    assert {a: _agent_keys(project, a) for a in base} == base
    # The CLIs' name for it re-runs the CLIs only; litellm's name, the litellm agent only.
    project.write("llmtt.toml", toml + 'id = "house-v3"\n')
    assert _agent_keys(project, "claude-code") != base["claude-code"]
    assert _agent_keys(project, "litellm") == base["litellm"]
    project.write("llmtt.toml", toml + 'litellm = "openai/house-v3"\n')
    assert _agent_keys(project, "claude-code") == base["claude-code"]
    assert _agent_keys(project, "litellm") != base["litellm"]


def test_a_bad_key_variable_name_is_a_located_load_error(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML + '\n[models.house]\napi_key_env = "GW KEY"\n')
    project.write("scenarios/s.yaml", SCENARIO)
    result = project.doit("list")
    text = result.out + result.err
    assert result.code != 0
    assert "llmtt.toml" in text and "models.house.api_key_env" in text
    assert "Traceback" not in text


def test_the_judge_and_the_litellm_agent_ask_for_the_models_own_key_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GW_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "another-providers-key")
    models = {"house": ModelSpec(litellm="openai/house", api_base="http://127.0.0.1:9/v1")}
    assert missing_key(resolve_model("house", models)) is None  # a gateway may need no key
    models = {"house": ModelSpec(litellm="openai/house", api_key_env="GW_KEY")}
    said = missing_key(resolve_model("house", models))
    assert said == "no API key: set GW_KEY ([models.house] api_key_env)"
    monkeypatch.setenv("GW_KEY", "k")
    assert missing_key(resolve_model("house", models)) is None


def test_the_litellm_agent_refuses_a_model_whose_key_is_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GW_KEY", raising=False)
    project = _project(tmp_path, '\n[models.house]\nlitellm = "openai/h"\napi_key_env = "GW_KEY"\n')
    loaded = load_project(project.root)
    agent = make_agent(loaded.config, loaded.root, "litellm")
    said = agent.unavailable("house")
    assert said == "litellm with model 'house': no API key: set GW_KEY ([models.house] api_key_env)"
    assert agent.unavailable("scripted") is None
    monkeypatch.setenv("GW_KEY", "k")
    assert agent.unavailable("house") is None


def test_a_models_own_key_variable_is_the_one_the_gateway_uses_for_its_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[models.X] api_key_env names the key for the agent's own provider too: the gateway
    adds that one, never another provider variable that happens to be set."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "the-default")
    monkeypatch.setenv("OPENAI_API_KEY", "the-default")
    toml = (
        '\n[models.team]\nid = "anthropic/claude-sonnet-4-5"\napi_key_env = "TEAM_KEY"\n'
        '\n[models.gpt]\nid = "gpt-5"\napi_key_env = "TEAM_KEY"\n'
    )
    project = load_project(_project(tmp_path, toml).root)
    for agent, model in (("opencode", "team"), ("claude-code", "team"), ("codex", "gpt")):
        own = make_agent(project.config, project.root, agent)
        own.models = project.config.models
        found = own.own_provider(model, {"TEAM_KEY": "the-teams"})
        assert found is not None and found.key == "the-teams", agent
        assert "TEAM_KEY" in found.secrets, agent
        assert own.own_provider(model, {}) is None, agent  # not the default's key
