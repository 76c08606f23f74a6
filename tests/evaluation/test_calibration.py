"""`llmtt judge freeze` and `llmtt judge calibrate`: frozen oracle runs, a judge stood in for
at the wire that is too lenient, the scores cached until a case, its rubric or the judge
changes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import DOIT, FakeProvider, Project, chat_answer
from test_judge import ENABLED, good, judged_project

LLMTT = str(Path(DOIT).parent / "llmtt")


def llmtt(project: Project, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("LLMTT_")}
    proc = subprocess.run(
        [LLMTT, *args],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, **(env or {})},
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_a_lenient_judge_is_out_of_band_and_scores_are_cached_until_the_rubric_changes(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    url, handler = provider
    handler.queue = [(200, chat_answer(good(1.0, 1.0, 1.0)))]
    judged_project(project, url)
    scenario = project.root / "scenarios/s.yaml"
    # A prompt no hand-quoted TOML string holds: four quotes, an ESC, a bare CR.
    weird = r'"Commit a file. \"\"\"\" \e[1m\rdone"'
    scenario.write_text(scenario.read_text().replace("Commit a file.", weird))
    assert project.doit("run", "repeats=2", env=ENABLED).code == 0
    asked = len(handler.hits)
    for run in ("s/oracle/r1", "s/oracle/r2"):
        code, out = llmtt(project, "judge", "freeze", run)
        assert code == 0, out
    case = project.root / "calibration/s-oracle-r1"
    assert sorted(p.name for p in case.iterdir()) == [
        "case.toml",
        "events.jsonl",
        "gates.json",
        "guidance.json",
        "run.json",
    ]
    code, out = llmtt(project, "judge", "calibrate", env=ENABLED)
    assert code == 2 and "Traceback" not in out
    assert "calibration/s-oracle-r1/case.toml" in out and "expected" in out, out
    assert len(handler.hits) == asked
    with open(case / "case.toml", "a") as toml:
        toml.write("expected = 0.3\n")
    with open(project.root / "calibration/s-oracle-r2/case.toml", "a") as toml:
        toml.write("expected = [0.2, 0.5]\n")

    code, out = llmtt(project, "judge", "calibrate", env=ENABLED)
    assert code == 1, out
    assert "s-oracle-r1: judge 1, expected 0.2 to 0.4: OUT OF BAND" in out
    assert "leniency +0.675 (mean judge minus mean expected: too lenient)" in out
    assert "cost $0.000030" in out
    assert len(handler.hits) == asked + 2
    prompt = handler.bodies[-1]["messages"][1]["content"]
    assert 'Commit a file. """" \x1b[1m\rdone' in prompt and "$ git commit -q -m a" in prompt
    found = json.loads((project.root / "calibration/calibration.json").read_text())
    assert found["leniency"] == pytest.approx(0.675) and found["out_of_band"] == 2
    assert found["mean_absolute_error"] == pytest.approx(0.675)

    code, out = llmtt(project, "judge", "calibrate")  # nothing changed: nothing asked or paid
    assert code == 1 and "(cached)" in out and "0 request(s), cost $0.000000" in out, out
    assert len(handler.hits) == asked + 2

    for name in ("s-oracle-r1", "s-oracle-r2"):  # a new expectation is not a new question
        toml = project.root / "calibration" / name / "case.toml"
        toml.write_text(toml.read_text().replace("expected = 0.3", "expected = [0.9, 1]"))
        toml.write_text(toml.read_text().replace("expected = [0.2, 0.5]", "expected = 0.95"))
    code, out = llmtt(project, "judge", "calibrate")
    assert code == 0 and "2 in band, 0 out of band" in out, out

    rubric = project.root / "rubrics/r.yaml"
    rubric.write_text(rubric.read_text().replace("No wasted commands.", "Few commands."))
    code, out = llmtt(project, "judge", "calibrate")
    assert code == 2 and "set LLMTT_ENABLED=1" in out, out  # re-scoring is paid for
    code, out = llmtt(project, "judge", "calibrate", env=ENABLED)
    assert code == 0 and len(handler.hits) == asked + 4, out
    assert "Few commands." in handler.bodies[-1]["messages"][1]["content"]

    # The run's task is not the project's any more: freezing it would copy what it never saw.
    scenario.write_text(scenario.read_text().replace("Commit a file.", "Commit one file."))
    code, out = llmtt(project, "judge", "freeze", "s/oracle/r1", "--into", "again")
    assert code != 0 and "Traceback" not in out, out
    assert "run s/oracle/r1 was carried out under another task" in out
    assert "run it again first (doit run), then freeze it" in out
    assert not (project.root / "again").exists()


def test_a_case_without_a_valid_expectation_is_named_by_file_line_and_field(
    tmp_path: Path,
) -> None:
    from llmtt.errors import ConfigError
    from llmtt.evaluation.calibration import load_cases

    (tmp_path / "r.yaml").write_text("criteria:\n  - {id: ok, weight: 1, description: done}\n")
    for name, expected in (("a", "expected = [0.9, 0.2]"), ("b", "expected = 0.8")):
        case = tmp_path / "calibration" / name
        case.mkdir(parents=True)
        for file in ("events.jsonl", "run.json", "gates.json"):
            (case / file).write_text("{}\n")
        (case / "case.toml").write_text(f'prompt = "Do it."\nrubric = "r.yaml"\n{expected}\n')
    with pytest.raises(ConfigError) as caught:
        load_cases(tmp_path / "calibration", tmp_path)
    said = str(caught.value)
    assert "calibration/a/case.toml:3" in said and "expected" in said, said
    assert "a band low to high (expected = [0.6, 0.9])" in said
    (tmp_path / "calibration/a/case.toml").write_text(
        'prompt = "Do it."\nrubric = "r.yaml"\nexpected = 0.8\ntolerance = 0.05\n'
    )
    cases = load_cases(tmp_path / "calibration", tmp_path)
    assert [(c.name, c.band, c.expected) for c in cases] == [
        ("a", (0.75, 0.85), 0.8),
        ("b", (0.7, 0.9), 0.8),
    ]


def test_the_cache_keeps_every_sample_keys_the_provider_and_refuses_a_damaged_one(
    tmp_path: Path,
) -> None:
    """samples 2, then 1, then 2 again asks twice in all; another endpoint under the same
    alias is another question; a cache that is not lists of scored samples is said damaged."""
    from llmtt.errors import LlmttError
    from llmtt.evaluation.calibration import calibrate, case_key, check_cache, load_cases
    from llmtt.providers import ResolvedModel

    (tmp_path / "r.yaml").write_text("criteria:\n  - {id: ok, weight: 1, description: done}\n")
    case = tmp_path / "calibration/a"
    case.mkdir(parents=True)
    for file in ("events.jsonl", "run.json", "gates.json"):
        (case / file).write_text("{}\n")
    (case / "case.toml").write_text('prompt = "Do it."\nrubric = "r.yaml"\nexpected = 0.5\n')
    cases = load_cases(tmp_path / "calibration", tmp_path)
    model = ResolvedModel("j", "openai/j", "http://a", None, None, free=True)
    asked: list[str] = []

    def ask(_case: object, prompt: str) -> dict[str, object]:
        asked.append(prompt)
        return {"weighted_score": 0.5, "attempts": 1, "cost_usd": 0.0}

    cache: dict[str, object] = {}
    for samples in (2, 1, 2):
        found = calibrate(cases, model, {"a": "P"}, cache, ask, samples, None)
        assert found["cases"][0]["score"] == 0.5
    assert len(asked) == 2
    elsewhere = ResolvedModel("j", "openai/j", "http://b", None, None, free=True)
    assert case_key(cases[0], model, "P") != case_key(cases[0], elsewhere, "P")
    path = tmp_path / "cache.json"
    assert check_cache(cache, path) is cache
    for damaged in ([], {"k": {}}, {"k": [1]}, {"k": [{"weighted_score": "high"}]}):
        with pytest.raises(LlmttError, match="cache.json is damaged: remove it"):
            check_cache(damaged, path)
