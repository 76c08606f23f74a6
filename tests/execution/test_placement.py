"""Guidance and skills declared once, placed where each agent reads them; SKILL.md checked at
load with located errors; the no-guidance control takes out what the variants place."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CLI_AGENTS, GIT_TOML, Project, cli_project

from llmtt.agents.registry import make_agent
from llmtt.errors import ConfigError
from llmtt.evaluation.gates import GateContext, run_gates
from llmtt.evaluation.guidance_use import use_fields
from llmtt.execution.placement import control_paths, laid_files, placement
from llmtt.plan.runs import _variant_key
from llmtt.report.triggers import trigger_rates
from llmtt.spec.config import CONTROL_VARIANT
from llmtt.spec.gates import SkillTriggersGate
from llmtt.spec.project import load_project

SKILL = """\
---
name: tally
description: Use when asked to count lines of files.
---
Count with `wc -l FILE`.
"""

VARIANT = """
[variants.taught]
guidance = "guides/tool.md"
skills = ["skills/tally"]

[matrix]
variants = ["taught"]
"""


def _project(project: Project, toml: str = VARIANT, skill: str = SKILL) -> Project:
    project.write("llmtt.toml", GIT_TOML + toml)
    project.write("guides/tool.md", "Use git with care.\n")
    project.write("skills/tally/SKILL.md", skill)
    project.write("skills/tally/scripts/count.sh", 'wc -l "$1"\n')
    project.write(
        "scenarios/s.yaml",
        """\
        task: {prompt: Count the lines.}
        solution:
          - cat AGENTS.md > seen.txt
          - cat .agents/skills/tally/SKILL.md >> seen.txt
          - ls .agents/skills/tally/scripts >> seen.txt
        evaluation:
          gates:
            - {type: file_contains, path: seen.txt, substring: "Use git with care."}
            - {type: file_contains, path: seen.txt, substring: "Count with"}
            - {type: file_contains, path: seen.txt, substring: "count.sh"}
        """,
    )
    return project


@pytest.mark.parametrize(
    ("agent", "guidance", "skills"),
    [
        ("claude-code", "CLAUDE.md", ".claude/skills"),
        ("codex", "AGENTS.md", ".agents/skills"),
        ("opencode", "AGENTS.md", ".opencode/skills"),
        ("litellm", "AGENTS.md", ".agents/skills"),
        ("oracle", "AGENTS.md", ".agents/skills"),
    ],
)
def test_each_agent_gets_the_guidance_and_skills_where_it_reads_them(
    project: Project, agent: str, guidance: str, skills: str
) -> None:
    loaded = load_project(_project(project).root)
    placed = placement(
        loaded.config, loaded.root, "taught", make_agent(loaded.config, loaded.root, agent)
    )
    assert [(p.kind, p.path) for p in placed] == [
        ("guidance", guidance),
        ("skill", f"{skills}/tally"),
    ]
    files = laid_files(placed, loaded.root)
    assert sorted(files) == sorted(
        [guidance, f"{skills}/tally/SKILL.md", f"{skills}/tally/scripts/count.sh"]
    )


def test_a_run_finds_them_in_its_workspace_and_says_where_they_went(project: Project) -> None:
    """A real run: the oracle reads what was placed; run.json names each placement; the
    no-guidance control has neither, though the fixture had both."""
    _project(project, VARIANT.replace("[matrix]", "[compare]\ncontrol = true\n\n[matrix]"))
    project.write("scenarios/fixtures/f/AGENTS.md", "the fixture's own\n")
    project.write("scenarios/fixtures/f/.agents/skills/tally/SKILL.md", SKILL)
    project.write("scenarios/fixtures/f/.agents/skills/tally/stale.md", "an older version\n")
    scenario = (project.root / "scenarios/s.yaml").read_text()
    project.write("scenarios/s.yaml", "fixture: fixtures/f\n" + scenario)
    assert project.doit("run").code == 0
    run = project.json("s/oracle-taught/r1/run.json")
    assert run["placed"] == [
        {"kind": "guidance", "source": "guides/tool.md", "path": "AGENTS.md"},
        {
            "kind": "skill",
            "source": "skills/tally",
            "path": ".agents/skills/tally",
            "name": "tally",
        },
    ]
    assert project.json("s/oracle-taught/r1/metrics.json")["outcome"] == "pass"
    taught = project.results() / "s/oracle-taught/r1/workspace/.agents/skills/tally"
    assert sorted(p.name for p in taught.rglob("*")) == ["SKILL.md", "count.sh", "scripts"]
    control = project.results() / "s/oracle-no-guidance/r1/workspace"
    assert not (control / "AGENTS.md").exists()
    assert not (control / ".agents/skills/tally").exists()
    assert "placed" not in project.json("s/oracle-no-guidance/r1/run.json")
    assert project.json("s/oracle-no-guidance/r1/metrics.json")["outcome"] == "fail"


def test_editing_a_skills_script_re_runs_that_variant_only(project: Project) -> None:
    _project(project, VARIANT.replace('["taught"]', '["taught", "none"]'))
    first = project.doit("run")
    assert {"s/oracle-taught/r1:agent", "s/oracle/r1:agent"} <= set(first.executed()), first.out
    project.write("skills/tally/scripts/count.sh", 'wc -l < "$1"\n')
    again = project.doit("run")
    ran = [t for t in again.executed() if t.endswith(":agent")]
    assert ran == ["s/oracle-taught/r1:agent"], again.out
    # a file added to a folder of the skill: only that folder's time moves
    project.write("skills/tally/scripts/extra.sh", "true\n")
    added = project.doit("run")
    assert [t for t in added.executed() if t.endswith(":agent")] == ran, added.out


def test_a_scenarios_own_guidance_and_skill_a_variant_replaces_and_the_control_takes_out(
    project: Project,
) -> None:
    """A scenario's own guidance and skill reach every run of it; a variant's guidance
    replaces the scenario's; the control has neither. Editing the scenario's guidance re-runs
    the runs that are given it, and no other."""
    toml = '[variants.taught]\nguidance = "guides/tool.md"\n\n[variants.plain]\n'
    toml += 'files = {"notes.txt" = "guides/tool.md"}\n\n[compare]\ncontrol = true\n\n'
    toml += '[matrix]\nvariants = ["taught", "plain"]\n'
    _project(project, toml)
    project.write("scenarios/own.md", "The scenario's own guidance.\n")
    project.write("scenarios/own-skills/tally/SKILL.md", SKILL)
    scenario = (project.root / "scenarios/s.yaml").read_text()
    scenario = scenario.replace("Use git with care.", "guidance")
    scenario = scenario.replace("count.sh", "SKILL.md")
    scenario = scenario.replace("ls .agents/skills/tally/scripts", "ls .agents/skills/tally")
    project.write("scenarios/s.yaml", "guidance: own.md\nskills: [own-skills/tally]\n" + scenario)
    first = project.doit("run")
    assert first.code == 0, first.out + first.err
    skill = {
        "kind": "skill",
        "source": "scenarios/own-skills/tally",
        "path": ".agents/skills/tally",
    }
    skill["name"] = "tally"
    placed = {
        v: project.json(f"s/oracle-{v}/r1/run.json").get("placed")
        for v in ("taught", "plain", "no-guidance")
    }
    assert placed == {
        "taught": [{"kind": "guidance", "source": "guides/tool.md", "path": "AGENTS.md"}, skill],
        "plain": [{"kind": "guidance", "source": "scenarios/own.md", "path": "AGENTS.md"}, skill],
        "no-guidance": None,
    }
    ws = project.results() / "s/oracle-plain/r1/workspace"
    assert (ws / "AGENTS.md").read_text() == "The scenario's own guidance.\n"
    control = project.results() / "s/oracle-no-guidance/r1/workspace"
    assert not (control / "AGENTS.md").exists() and not (control / ".agents").exists()
    project.write("scenarios/own.md", "The scenario's own guidance, edited.\n")
    again = project.doit("run")
    assert [t for t in again.executed() if t.endswith(":agent")] == ["s/oracle-plain/r1:agent"]


def test_a_scenarios_skill_is_checked_where_the_scenario_names_it(project: Project) -> None:
    _project(project)
    project.write("scenarios/own-skills/Tally/SKILL.md", SKILL)
    scenario = (project.root / "scenarios/s.yaml").read_text()
    project.write(
        "scenarios/s.yaml", "guidance: absent.md\nskills: [own-skills/Tally]\n" + scenario
    )
    with pytest.raises(ConfigError) as caught:
        load_project(project.root)
    found = sorted((p.file.name, p.line, p.field, p.message) for p in caught.value.problems)
    assert found == [
        (
            "SKILL.md",
            2,
            "name",
            "'tally' must equal its folder's name 'Tally' (the agents find a skill by its folder)",
        ),
        ("s.yaml", 1, "guidance", "'absent.md' does not exist"),
    ]


@pytest.mark.parametrize(
    ("skill", "line", "field", "says"),
    [
        ("no front matter\n", 1, None, "must open with YAML front matter"),
        ("---\nname: tally\n", 1, None, "never closed"),
        ("---\ndescription: d\n---\n", None, "name", "missing"),
        ("---\nname: Tally\ndescription: d\n---\n", 2, "name", "lowercase letters"),
        ("---\nname: other\ndescription: d\n---\n", 2, "name", "must equal its folder's name"),
        ("---\nname: tally\n---\n", None, "description", "missing"),
        ("---\nname: tally\ndescription: " + "x" * 1025 + "\n---\n", 3, "description", "1024"),
        ("---\nname: [tally\n---\n", 3, None, "invalid YAML front matter"),
    ],
)
def test_a_bad_skill_md_is_a_located_load_error(
    project: Project, skill: str, line: int | None, field: str | None, says: str
) -> None:
    _project(project, skill=skill)
    with pytest.raises(ConfigError) as caught:
        load_project(project.root)
    (problem,) = [p for p in caught.value.problems if says in p.message]
    assert problem.file == project.root.resolve() / "skills/tally/SKILL.md"
    assert (problem.line, problem.field) == (line, field), problem
    assert all(p.file == problem.file for p in caught.value.problems)


def test_a_missing_skill_folder_or_guidance_file_names_the_field(project: Project) -> None:
    _project(project, VARIANT.replace("skills/tally", "skills/nothing").replace("tool.md", "x.md"))
    with pytest.raises(ConfigError) as caught:
        load_project(project.root)
    said = str(caught.value)
    assert "variants.taught.guidance: 'guides/x.md' does not exist" in said
    assert "variants.taught.skills[0]: skill folder" in said and "does not exist" in said
    lines = [p.line for p in caught.value.problems]
    assert all(isinstance(n, int) for n in lines), lines


def test_guidance_and_a_file_of_the_same_place_are_refused(project: Project) -> None:
    _project(
        project,
        VARIANT.replace(
            'guidance = "guides/tool.md"',
            'guidance = "guides/tool.md"\nfiles = { "AGENTS.md" = "guides/tool.md" }',
        ),
    )
    with pytest.raises(ConfigError, match="files also writes AGENTS.md"):
        load_project(project.root)


def test_the_control_takes_out_each_agents_own_places(project: Project) -> None:
    loaded = load_project(_project(project).root)
    claude = make_agent(loaded.config, loaded.root, "claude-code")
    assert control_paths(loaded.config, claude) == [".claude/skills/tally", "CLAUDE.md"]
    # opencode reads CLAUDE.md without an AGENTS.md, and three skills folders besides its own
    opencode = make_agent(loaded.config, loaded.root, "opencode")
    assert control_paths(loaded.config, opencode) == [
        ".agents/skills/tally",
        ".claude/skills/tally",
        ".opencode/skill/tally",
        ".opencode/skills/tally",
        "AGENTS.md",
        "CLAUDE.md",
    ]


def test_the_controls_key_holds_only_what_it_takes_out(project: Project) -> None:
    """Renaming a variant, or adding another with guidance, takes out nothing more: the
    control's finished runs keep their key."""
    loaded = load_project(_project(project).root)
    before = _variant_key(loaded, CONTROL_VARIANT)
    renamed = (
        VARIANT.replace("taught", "tutored") + '\n[variants.v3]\nguidance = "guides/tool.md"\n'
    )
    again = load_project(_project(project, renamed).root)
    assert _variant_key(again, CONTROL_VARIANT) == before
    other = load_project(_project(project, VARIANT.replace('skills = ["skills/tally"]', "")).root)
    assert _variant_key(other, CONTROL_VARIANT) != before


def test_each_real_agent_shows_the_model_its_guidance_and_the_skill_it_loads(
    tmp_path: Path,
) -> None:
    """The three CLIs and the litellm loop on the scripted model: each is sent the guidance
    and the skill's description (exposed); the session that loads the skill, with the agent's
    skill tool or a read of SKILL.md, puts its body in the next request (invoked, turn 1);
    the session that never loads it leaves it exposed only; and one that loads it where it
    should not is caught: each agent's trigger counts, and the skill_triggers gate."""
    project = cli_project(tmp_path / "p")
    tables = (project.root / "llmtt.toml").read_text().removeprefix(GIT_TOML)
    agents = ", ".join(f'"{a}"' for a in CLI_AGENTS)
    matrix = f'[matrix]\nagents = [{agents}]\nmodels = ["scripted"]'
    _project(project, VARIANT.replace("[matrix]", matrix) + tables)
    session = """\
        task: {prompt: Count the lines.}
        scripted:
          turns:
            - skill: tally
            - run: [git init -q . && echo 3 > out.txt]
        evaluation:
          gates:
            - {type: file_exists, path: out.txt}
            - {type: skill_triggers}
        """
    should = "        skill_triggers: {should_trigger: [tally]}\n"
    project.write("scenarios/loads.yaml", should + session)
    project.write("scenarios/ignores.yaml", should + session.replace("- skill: tally\n", ""))
    project.write("scenarios/wrongly.yaml", should.replace("should_", "should_not_") + session)
    (project.root / "scenarios/s.yaml").unlink()
    runs = [
        f"{s}/{a}-scripted-taught/r1" for s in ("loads", "ignores", "wrongly") for a in CLI_AGENTS
    ]
    result = project.doit("run", "-n", "4")
    assert result.code == 0, result.out + result.err
    verdicts = {"loads": "tp", "ignores": "fn", "wrongly": "fp"}
    for run in runs:
        metrics = project.json(f"{run}/metrics.json")
        seen = {k: metrics.get(k) for k in ("guidance_read", "skills_exposed", "skills_invoked")}
        loads = not run.startswith("ignores/")
        assert metrics["skill_triggers"] == {"tally": verdicts[run.split("/")[0]]}, run
        wrong = {
            "ignores": "not loaded though it should be",
            "wrongly": "loaded though it should not be",
        }.get(run.split("/")[0])
        assert metrics["outcome"] == ("fail" if wrong else "pass"), (run, metrics)
        gate = project.json(f"{run}/gates.json")["gates"][1]
        assert gate["passed"] is (wrong is None), (run, gate)
        assert gate["message"] == (f"tally {wrong}" if wrong else "tally loaded as it should be")
        assert seen == {
            "guidance_read": True,
            "skills_exposed": ["tally"],
            "skills_invoked": ["tally"] if loads else [],
        }, run
        assert metrics["first_read_turn"] == (1 if loads else None), run
        assert metrics["skill_before_target"] == (True if loads else None), run
    rates = {(t["agent"], t["skill"]): t for t in project.json("report.json")["skill_triggers"]}
    for agent in CLI_AGENTS:
        rate = rates[(agent, "tally")]
        assert (rate["tp"], rate["fn"], rate["fp"], rate["tn"]) == (1, 1, 1, 0), agent
        assert (rate["precision"], rate["recall"], rate["f1"]) == (0.5, 0.5, 0.5), agent
    assert "## Skill triggers" in (project.results() / "report.md").read_text()
    html = (project.results() / "report.html").read_text()
    row = '<td>litellm</td><td>scripted</td><td><b>tally</b></td><td class="pass">1</td>'
    assert row in html


def test_a_trigger_naming_no_skill_is_a_located_error(project: Project) -> None:
    _project(project)
    scenario = (project.root / "scenarios/s.yaml").read_text()
    project.write("scenarios/s.yaml", "skill_triggers:\n  should_trigger: [talley]\n" + scenario)
    with pytest.raises(ConfigError) as caught:
        load_project(project.root)
    (problem,) = caught.value.problems
    assert (problem.line, problem.field) == (2, "skill_triggers.should_trigger[0]")
    assert (
        "neither a variant nor the scenario places a skill named 'talley' (skills: tally)"
        in problem.message
    )


def test_a_trigger_gate_needs_the_scenarios_triggers_and_names_only_theirs(
    project: Project,
) -> None:
    _project(project)
    scenario = (project.root / "scenarios/s.yaml").read_text()
    gate = "    - {type: skill_triggers, skills: [tally, tallyho]}\n"
    project.write("scenarios/s.yaml", scenario + gate)
    with pytest.raises(ConfigError) as caught:
        load_project(project.root)
    (problem,) = caught.value.problems
    assert (problem.line, problem.field) == (11, "evaluation.gates[3].type")
    assert "a skill_triggers gate needs the scenario's skill_triggers" in problem.message
    project.write(
        "scenarios/s.yaml", "skill_triggers: {should_trigger: [tally]}\n" + scenario + gate
    )
    with pytest.raises(ConfigError) as caught:
        load_project(project.root)
    (problem,) = caught.value.problems
    assert (problem.line, problem.field) == (12, "evaluation.gates[3].skills[1]")
    assert "'tallyho' is in neither skill_triggers.should_trigger" in problem.message


@pytest.mark.parametrize(
    ("verdicts", "skills", "passed", "message"),
    [
        (
            {"a": "tp", "b": "tn"},
            [],
            True,
            "a loaded as it should be, b left alone as it should be",
        ),
        (
            {"a": "fn", "b": "fp"},
            [],
            False,
            "a not loaded though it should be; b loaded though it should not be",
        ),
        ({"a": "fn", "b": "tn"}, ["b"], True, "b left alone as it should be"),
        ({}, [], None, "the run placed none of the skills this gate holds"),
        (
            {"a": "tp"},
            ["b"],
            None,
            "the run placed none of the skills this gate holds",
        ),
        (None, [], None, "the run has no wire record"),
    ],
)
def test_a_trigger_gate_holds_each_placed_skill_it_names(
    tmp_path: Path,
    verdicts: dict[str, str] | None,
    skills: list[str],
    passed: bool | None,
    message: str,
) -> None:
    gate = SkillTriggersGate(skills=skills)
    ctx = GateContext(
        workspace=tmp_path, env={}, timeout_secs=5, target_commands=[], triggers=verdicts
    )
    (record,) = run_gates([gate], ctx)
    assert record["passed"] is passed
    assert record["message"].startswith(message)


def test_a_retried_or_refused_request_is_no_turn_of_its_own() -> None:
    """first_read_turn counts the loop's answered requests, each body once."""
    loop = {"wire": "openai-chat", "tools": 3, "status": 200}
    records = [
        {**loop, "body_sha": "a", "status": 429},  # rate-limited, then
        {**loop, "body_sha": "a"},  # retried: turn 1, whose answer loads the skill
        {**loop, "body_sha": "a"},  # the same body again (an agent's own retry)
        {**loop, "body_sha": "b", "seen": ["loaded:tally", "listed:tally"]},  # turn 2
    ]
    placed = [{"kind": "skill", "name": "tally"}]
    fields = use_fields(placed, records)
    assert (fields["first_read_turn"], fields["skills_invoked"]) == (1, ["tally"])
    unknown = use_fields(placed, None)
    assert unknown["skill_before_target"] is None and unknown["skills_invoked"] is None


def test_an_agent_wrong_every_time_has_an_f1_of_zero() -> None:
    rows = [
        {"agent": "a", "model": "m", "outcome": "fail", "metrics": {"skill_triggers": {"s": v}}}
        for v in ("fn", "fp", "tn")
    ]
    (row,) = trigger_rates(rows)
    assert (row["precision"], row["recall"], row["f1"]) == (0.0, 0.0, 0.0)
    assert trigger_rates([{**rows[2], "outcome": "error"}]) == []
