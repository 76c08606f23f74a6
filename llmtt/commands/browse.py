"""`llmtt scenarios` and `llmtt show`: what a project holds and what a run left."""

from __future__ import annotations

from pathlib import Path

from llmtt.errors import LlmttError


def scenarios(root: Path, tags: list[str], tiers: list[str]) -> int:
    from llmtt.spec.project import load_project
    from llmtt.spec.selection import Selection, nearest

    selection = Selection.from_variables({"tag": ",".join(tags), "tier": ",".join(tiers)})
    project = load_project(root)
    chosen = [
        s
        for s in project.scenarios
        if (not selection.tags or set(selection.tags) & set(s.spec.tags))
        and selection.tier_selected(s.spec.tier)
    ]
    if not chosen:
        known = {t for s in project.scenarios for t in s.spec.tags}
        hint = "".join(nearest(t, known) for t in selection.tags if t not in known)
        raise LlmttError(f"no scenario has {selection.describe()}{hint}")
    for s in sorted(chosen, key=lambda s: s.name):
        about = s.spec.description.strip().splitlines()
        print(
            f"{s.name}  tier {s.spec.tier}  expect {s.spec.expect}  "
            f"tags {','.join(s.spec.tags) or '-'}  {_shown_path(root, s.path)}"
        )
        if about:
            print(f"    {about[0]}")
    print(f"{len(chosen)} of {len(project.scenarios)} scenarios")
    return 0


def _shown_path(root: Path, path: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def show(root: Path, name: str) -> int:
    from llmtt.spec.config import load_config

    config, _ = load_config(root)
    folder = root / config.paths.results / name.strip("/")
    if (folder / "result.json").is_file() or (folder / "run.json").is_file():
        return _show_run(folder, name.strip("/"))
    from llmtt.plan.runs import build_plan
    from llmtt.spec.project import load_project
    from llmtt.spec.selection import Selection, nearest

    project = load_project(root)
    names = [s.name for s in project.scenarios]
    if name not in names:
        planned = [r.run_id for r in build_plan(project, Selection()).runs]
        if name in planned:
            print(f"run {name}: not run yet (`doit run` runs it)")
            return 0
        names += planned
        raise LlmttError(
            f"{name} is neither a scenario of {root} nor a run folder in "
            f"{root / config.paths.results}{nearest(name, names)} (`llmtt scenarios` lists them)"
        )
    scenario = project.scenario(name)
    spec = scenario.spec
    runs = build_plan(project, Selection(scenarios=(name,))).runs
    target = project.target_for(scenario)
    print(f"scenario {name} ({_shown_path(root, scenario.path)})")
    if spec.description.strip():
        print(f"  description: {' '.join(spec.description.split())}")
    print(f"  tags: {', '.join(spec.tags) or '-'}; tier {spec.tier}; expect {spec.expect}")
    print(f"  target: {target.binary or '-'} (command pattern {target.effective_pattern()})")
    first = runs[0]
    cost = f"${spec.cost.max_usd:g}" if spec.cost.max_usd is not None else "no limit"
    print(f"  limits: {first.timeout_secs:g} s, {first.max_turns} turns, cost {cost}")
    print(f"  fixture: {scenario.fixture_dir or '-'}; solution: {len(spec.solution)} commands")
    print(f"  runs ({len(runs)}, with the default matrix):")
    for run in runs:
        print(f"    {run.run_id}  (agent {run.agent} {run.agent_version})")
    gates = spec.evaluation.gates
    print(f"  gates ({len(gates)}):")
    for index, gate in enumerate(gates, start=1):
        said = gate.description or " ".join(
            f"{k}={v}" for k, v in gate.model_dump(exclude_defaults=True).items() if k != "type"
        )
        print(f"    {index}. {gate.type}: {said}")
    evaluators = spec.evaluation.evaluators
    if evaluators:
        print("  evaluators: " + ", ".join(e.type for e in evaluators))
    judge = first.judge
    if judge is not None:
        print(f"  judge: {judge.model}, rubric {judge.rubric}, pass at {judge.threshold:g}")
    return 0


def _show_run(folder: Path, run_id: str) -> int:
    from llmtt.util.atomic import read_json
    from llmtt.util.text import printable

    result = folder / "result.json"
    if not result.is_file():
        print(f"run {run_id}: not evaluated yet (`doit run` carries it on)\n  files: {folder}")
        return 0
    record = read_json(result)
    # The verdict against the scenario's `expect` is the reports' (report.json), when there.
    report = folder.parents[2] / "report.json"
    rows = read_json(report).get("runs", []) if report.is_file() else []
    verdicts = [r.get("verdict") for r in rows if r.get("run_id") == run_id]
    print(f"run {run_id}: {verdicts[0] if verdicts and verdicts[0] else record['outcome']}")
    print(f"  reason: {printable(record['outcome_reason'])}")
    gates_file = folder / "gates.json"
    gates = read_json(gates_file)["gates"] if gates_file.is_file() else []
    untold = record.get("gates_unknown") or 0
    print(
        f"  gates: {record.get('gates_passed')}/{record.get('gates_total')} passed"
        + (f", {untold} cannot tell" if untold else "")
    )
    for gate in gates:
        mark = {True: "pass", False: "FAIL", None: "cannot tell"}[gate["passed"]]
        print(f"    {gate['index']}. {mark} {gate['type']}: {printable(gate.get('message', ''))}")
    metrics = record.get("metrics") or {}
    shown = ("turns", "total_commands", "error_count", "help_invocations")
    print("  metrics: " + ", ".join(f"{k} {metrics.get(k, 'n/a')}" for k in shown))
    cost = record.get("cost_usd")
    print(
        f"  cost: {'unknown' if cost is None else f'${cost:g}'}; "
        f"duration {record.get('duration_secs')} s; "
        f"judge {(record.get('judge') or {}).get('weighted_score', 'none')}"
    )
    print(f"  files: {folder} (evaluation.md, events.jsonl, workspace/, ...)")
    return 0
