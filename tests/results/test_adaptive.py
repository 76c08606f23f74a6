"""`doit run repeats=auto` end to end: the litellm agent against a model on 127.0.0.1 that follows
the guidance it is given with a chosen chance, rounds of repeats until each scenario's verdict is
decided or its bound is reached, the runs spent reported, and the baseline named the other way
round flipping the sign without running anything again."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from conftest import GIT_TOML, Project, chat_answer, chat_call, serving

from llmtt.commands.main import main

# The model passes a run with the chance its guidance names: each run asks `pwd` first, and the
# repeat index in the answer picks a fixed draw, so an outcome never depends on the order the
# runs reach the model in.
CHANCE = re.compile(r"pass-chance: ([0-9.]+)")
WHERE = re.compile(r"/([\w-]+)/litellm-guided-(\w+)/r(\d+)/workspace")


def draw(scenario: str, variant: str, repeat: int) -> float:
    """A fixed uniform draw in [0, 1) per run: in the effect scenario the same for both variants
    (as a task's difficulty would be), in the null scenario one of each variant's own, so that
    its pairs disagree now and then, either way."""
    key = f"{scenario}/{repeat}" if scenario == "effect" else f"{scenario}/{variant}/{repeat}"
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class GuidedModel(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint whose model follows the guidance with its chance."""

    requests: list[int] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.requests.append(1)
        messages = body["messages"]
        system = next(m["content"] for m in messages if m["role"] == "system")
        task = next(m["content"] for m in messages if m["role"] == "user")
        tools = [str(m.get("content")) for m in messages if m["role"] == "tool"]
        found = CHANCE.search(task) or CHANCE.search(system)  # the task's own chance first
        chance = float(found.group(1)) if found else 0.0
        if not tools:
            answer = chat_call("pwd", "call-pwd")
        else:
            where = WHERE.search(tools[0])
            assert where, tools[0]
            scenario, variant, repeat = where.group(1), where.group(2), int(where.group(3))
            passes = draw(scenario, variant, repeat) < chance
            answer = (
                chat_call("touch done.txt", "call-touch")
                if passes and len(tools) == 1
                else chat_answer("ok")
            )
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def model() -> Iterator[tuple[str, type[GuidedModel]]]:
    handler = type("Guided", (GuidedModel,), {"requests": []})
    with serving(handler) as url:
        yield url, handler


def toml(url: str, baseline: str) -> str:
    return (
        GIT_TOML + f'\n[models.guided]\nlitellm = "openai/guided"\napi_base = "{url}"\n'
        'api_key_env = "GUIDED_KEY"\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 1.0\n'
        '\n[variants.terse]\nfiles = { "AGENTS.md" = "guides/terse.md" }\n'
        '\n[variants.rich]\nfiles = { "AGENTS.md" = "guides/rich.md" }\n'
        '\n[matrix]\nagents = ["litellm"]\nmodels = ["guided"]\nvariants = ["terse", "rich"]\n'
        f'\n[compare]\nbaseline = "{baseline}"\nround_repeats = 4\nmax_repeats = 8\n'
    )


def scenario(project: Project, name: str, prompt: str) -> None:
    """A scenario whose runs pass by `touch done.txt`."""
    project.write(
        f"scenarios/{name}.yaml",
        f"task: {{prompt: {json.dumps(prompt)}}}\nrun: {{max_turns: 5}}\n"
        "evaluation:\n  gates:\n    - {type: file_exists, path: done.txt}\n",
    )


def test_repeats_auto_decides_the_effect_and_not_the_null(
    project: Project, model: tuple[str, type[GuidedModel]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, handler = model
    project.write("guides/terse.md", "pass-chance: 0.2\n")
    project.write("guides/rich.md", "pass-chance: 0.95\n")
    project.write("llmtt.toml", toml(url, "terse"))
    scenario(project, "effect", "Make done.txt.")
    # the null scenario: a task whose chance (0.5) no guidance changes
    scenario(project, "null", "Make done.txt (pass-chance: 0.5).")
    env = {"LLMTT_ENABLED": "1", "GUIDED_KEY": "k"}
    # before spending: what a decision is likely to take, from assumed pass rates
    assert main(["estimate", str(project.root), "--repeats", "auto"]) == 0
    assert (
        "effect / litellm / guided: rich vs terse: no finished pair yet" in capsys.readouterr().out
    )
    assert (
        main(
            [
                "estimate",
                str(project.root),
                "--repeats",
                "auto",
                "--assume",
                "0.2,0.95",
            ]
        )
        == 0
    )
    planned = capsys.readouterr().out
    assert "16 pending of 16 runs" in planned  # the first round: 4 repeats of 2 variants, twice
    found = re.search(
        r"effect / litellm / guided: rich vs terse: about (\d+) pairs \(0 done", planned
    )
    assert found and 4 <= int(found.group(1)) <= 20, planned  # independent outcomes assumed
    listed = project.doit("list", "repeats=auto")
    assert listed.code == 0, listed.err
    names = [line.split()[0] for line in listed.out.splitlines() if "/r" in line]
    assert len(names) == 16 and {n.rsplit("/r", 1)[1] for n in names} == {"1", "2", "3", "4"}
    result = project.doit("run", "-n", "2", "repeats=auto", env=env)
    assert result.code == 0, result.out + result.err
    said = result.out
    assert "llmtt: repeats=auto: next round: " in said, said
    report = project.json("report.json")
    comparison = report["comparison"]
    units = {u["scenario"]: u for u in comparison["units"]}
    assert units["effect"]["verdict"] == "better", units["effect"]
    assert units["effect"]["difference"] > 0
    assert units["null"]["verdict"] in ("cant_tell", "no_difference"), units["null"]
    adaptive = comparison["adaptive"]
    assert adaptive["looks"] == 2
    # two units; under repeats=auto the pooled row is no comparison of its own
    assert comparison["family"] == 2 and comparison["level"] == round(1 - 0.05 / 4, 6)
    assert comparison["treatments"][0]["verdict"] is None
    spent = adaptive["scenarios"]
    assert spent["effect"]["status"] == "decided" and spent["null"]["status"] == "bound"
    assert spent["null"]["runs"] == 16  # two variants x max_repeats
    assert len(report["runs"]) == spent["effect"]["runs"] + 16
    # the pairs are the draws: each repeat passes where its draw is under the guidance's chance
    for unit in units.values():
        chances = (0.2, 0.95) if unit["scenario"] == "effect" else (0.5, 0.5)
        outcomes = [
            (
                draw(unit["scenario"], "terse", k) < chances[0],
                draw(unit["scenario"], "rich", k) < chances[1],
            )
            for k in range(1, unit["pairs"] + 1)
        ]
        gains = sum(1 for a, b in outcomes if b and not a)
        losses = sum(1 for a, b in outcomes if a and not b)
        assert (unit["gains"], unit["losses"]) == (gains, losses)
    assert units["null"]["gains"] and units["null"]["losses"]  # it could have gone either way
    assert said.rstrip().endswith(
        "llmtt: repeats=auto: effect 8 repeats (decided); null 8 repeats (stopped at "
        "max_repeats, undecided)"
    ), said[-400:]
    assert main(["estimate", str(project.root), "--repeats", "auto"]) == 0
    after = capsys.readouterr().out
    assert "0 pending of 32 runs" in after
    assert "effect / litellm / guided: rich vs terse: decided (better) at 8 pairs" in after
    text = (project.results() / "report.md").read_text()
    assert "repeats=auto: rounds of 4 repeats up to 8 (2 looks); effect: decided after" in text
    # named the other way round: the same runs, the sign and the verdict flipped
    requests = len(handler.requests)
    project.write("llmtt.toml", toml(url, "rich"))
    again = project.doit("run", "repeats=auto", env=env)
    assert again.code == 0, again.out + again.err
    assert len(handler.requests) == requests  # nothing ran again
    flipped = {u["scenario"]: u for u in project.json("report.json")["comparison"]["units"]}
    assert flipped["effect"]["verdict"] == "worse"
    assert flipped["effect"]["difference"] == -units["effect"]["difference"]


def oracle_project(project: Project, setup: str = "") -> None:
    """v2's guidance passes, v1's fails: rounds of 2 repeats up to 4 (decided at neither)."""
    project.write("guides/v1.md", "one\n")
    project.write("guides/v2.md", "two\n")
    project.write(
        "llmtt.toml",
        GIT_TOML + '\n[variants.v1]\nfiles = { "AGENTS.md" = "guides/v1.md" }\n'
        '\n[variants.v2]\nfiles = { "AGENTS.md" = "guides/v2.md" }\n'
        '\n[matrix]\nvariants = ["v1", "v2"]\n'
        '\n[compare]\nbaseline = "v1"\nround_repeats = 2\nmax_repeats = 4\n',
    )
    project.write(
        "scenarios/s.yaml",
        "task: {prompt: Read AGENTS.md.}\nsolution: ['grep -q two AGENTS.md && touch done.txt || true']\n"
        + setup
        + "evaluation:\n  gates:\n    - {type: file_exists, path: done.txt}\n",
    )


def test_always_re_runs_in_the_first_round_only(project: Project) -> None:
    oracle_project(project)
    result = project.doit("run", "-a", "repeats=auto")
    assert result.code == 0, result.out + result.err
    agents = [t for t in result.executed() if t.endswith(":agent")]
    # round 1: r1-r2 of both variants; round 2 adds r3-r4, and does not redo round 1's
    assert sorted(agents) == sorted(
        f"s/oracle-{v}/r{k}:agent" for v in ("v1", "v2") for k in (1, 2, 3, 4)
    ), agents
    assert "llmtt: repeats=auto: next round: s 4 repeats" in result.out


def test_a_round_with_a_run_not_carried_out_ends_the_rounds(project: Project) -> None:
    oracle_project(project, "setup: {commands: ['test -e AGENTS.md && grep -q two AGENTS.md']}\n")
    result = project.doit("run", "repeats=auto")
    assert result.code != 0  # v1's runs could not be carried out: they stay pending
    assert "next round" not in result.out
    agents = [t for t in result.executed() if t.endswith(":agent")]
    assert len(agents) == 4  # round 1 only
    assert "llmtt: repeats=auto: s 2 repeats (undecided so far)" in result.out
