"""Judge calibration: does the judge agree with what a person expects?

A calibration folder holds frozen cases, one folder each: what the judge reads of a run
(events.jsonl, run.json, gates.json, guidance.json) and a `case.toml` naming the task's prompt,
the rubric, and the score a person expects (`expected = 0.8`, within `tolerance`, or a band
`expected = [0.6, 0.9]`). Each case is scored by the configured judge; a score is cached under
a key of what the judge is shown (the case's files, the rubric, the judge model and prompt
version), so running it again costs nothing until one of those changes.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmtt.errors import ConfigError, LlmttError
from llmtt.evaluation.judge import SYSTEM, build_prompt, guidance_section, hold_for
from llmtt.plan.keys import JUDGE_VERSION
from llmtt.providers import ResolvedModel
from llmtt.redaction import Redactor
from llmtt.spec.rubric import Rubric, load_rubric
from llmtt.util.atomic import read_json, read_jsonl, write_json
from llmtt.util.hashing import hash_file, hash_value

CALIBRATION_FORMAT = 1
CASE_FILES = ("events.jsonl", "run.json", "gates.json", "guidance.json")
DEFAULT_TOLERANCE = 0.1


@dataclass(frozen=True)
class Case:
    """One frozen run and what a person expects the judge to score it."""

    name: str
    folder: Path
    prompt: str
    rubric_path: Path
    rubric: Rubric
    band: tuple[float, float]
    expected: float  # the score, or the band's middle: what leniency is measured against


def freeze(
    run_dir: Path,
    run_id: str,
    into: Path,
    prompt: str,
    rubric: str,
    guidance: list[tuple[str, str]],
    redact: Redactor,
) -> Path:
    """Copy what the judge reads of a finished run into a new case folder of `into`, with a
    case.toml for the person to write `expected` in; returns the folder."""
    for name in ("run.json", "events.jsonl", "gates.json"):
        if not (run_dir / name).is_file():
            raise LlmttError(
                f"run {run_id} has no {name} in {run_dir}: freeze a run that was carried out "
                "and evaluated (`doit run` it first)"
            )
    folder = into / run_id.replace("/", "-")
    if folder.exists():
        raise LlmttError(f"{folder} exists: remove it, or freeze into another folder (--into)")
    folder.mkdir(parents=True)
    for name in ("run.json", "events.jsonl", "gates.json"):
        shutil.copyfile(run_dir / name, folder / name)
    write_json(folder / "guidance.json", [list(g) for g in guidance], redact)
    (folder / "case.toml").write_text(
        f"# Frozen from run {run_id}: the judge is shown these files as it was shown the run.\n"
        f"prompt = {toml_string(prompt)}\nrubric = {toml_string(rubric)}\n"
        "# The score you expect the judge to give (within `tolerance`, default 0.1),\n"
        "# or a band: expected = [0.6, 0.9]\n# expected = 0.8\n",
        encoding="utf-8",
    )
    return folder


def toml_string(text: str) -> str:
    """`text` as a TOML basic string: JSON's string escapes are TOML's, but for DEL, which
    TOML wants escaped too (a lone surrogate, which neither UTF-8 nor TOML can hold, is
    written as U+FFFD)."""
    text = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def load_cases(folder: Path, root: Path) -> list[Case]:
    """Every case of a calibration folder (ConfigError naming the file and field of each
    mistake)."""
    if not folder.is_dir():
        raise LlmttError(
            f"no calibration folder {folder}: freeze runs into it with `llmtt judge freeze RUN`"
        )
    cases, problems = [], []
    for path in sorted(folder.glob("*/case.toml")):
        try:
            cases.append(_case(path, root))
        except ConfigError as exc:
            problems += exc.problems
    if problems:
        raise ConfigError(problems)
    if not cases:
        raise LlmttError(f"{folder} holds no case (a folder with a case.toml): freeze runs first")
    return cases


def _case(path: Path, root: Path) -> Case:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError.one(path, f"not valid TOML: {exc}") from None

    def wrong(field: str, message: str) -> ConfigError:
        return ConfigError.one(path, message, line=_line(path, field), field=field)

    for field in ("prompt", "rubric"):
        if not isinstance(data.get(field), str):
            raise wrong(field, f"`{field}` must be a string (as `llmtt judge freeze` wrote it)")
    expected: Any = data.get("expected")
    tolerance: Any = data.get("tolerance", DEFAULT_TOLERANCE)
    if not _number(tolerance) or not 0 <= tolerance <= 1:
        raise wrong("tolerance", "`tolerance` must be a number from 0 to 1")
    if _number(expected) and 0 <= expected <= 1:
        band = (round(max(0.0, expected - tolerance), 6), round(min(1.0, expected + tolerance), 6))
        middle = float(expected)
    elif (
        isinstance(expected, list)
        and len(expected) == 2
        and all(_number(v) and 0 <= v <= 1 for v in expected)
        and expected[0] <= expected[1]
    ):
        band = (float(expected[0]), float(expected[1]))
        middle = (band[0] + band[1]) / 2
    else:
        raise wrong(
            "expected",
            "`expected` must be the score you expect, 0 to 1 (expected = 0.8), or a band "
            "low to high (expected = [0.6, 0.9])",
        )
    rubric_path = root / data["rubric"]
    if not rubric_path.is_file():
        raise wrong("rubric", f"no rubric file {rubric_path}")
    for name in CASE_FILES[:3]:
        if not (path.parent / name).is_file():
            raise ConfigError.one(path.parent / name, "missing: freeze the run again")
    rubric = load_rubric(rubric_path)
    name = path.parent.name
    return Case(name, path.parent, data["prompt"], rubric_path, rubric, band, middle)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _line(path: Path, field: str) -> int | None:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.split("=", 1)[0].strip() == field:
            return number
    return None


def case_prompt(case: Case, max_chars: int, max_guidance: int, redact: Redactor) -> str:
    """What the judge is shown of a case: the prompt a run's judge would be."""
    guidance_path = case.folder / "guidance.json"
    guidance = read_json(guidance_path) if guidance_path.exists() else []
    if not isinstance(guidance, list) or not all(
        isinstance(g, list) and len(g) == 2 for g in guidance
    ):
        raise ConfigError.one(guidance_path, "must be a list of [where, text] pairs")
    gates = read_json(case.folder / "gates.json")
    if not isinstance(gates, dict) or not isinstance(gates.get("gates"), list):
        raise ConfigError.one(case.folder / "gates.json", "has no `gates` list: freeze again")
    return build_prompt(
        case.prompt,
        case.rubric,
        gates["gates"],
        read_jsonl(case.folder / "events.jsonl"),
        max_chars,
        redact,
        guidance_section([(str(w), str(t)) for w, t in guidance], max_guidance, redact),
    )


def case_key(case: Case, model: ResolvedModel, prompt: str) -> str:
    """The cache key of a case's score: its files, the rubric, the judge model (the model the
    provider is asked for, and where: not only its alias), the prompt and its version."""
    files = [hash_file(case.folder / n) for n in CASE_FILES]
    judge = [model.name, model.litellm, model.api_base]
    return hash_value([JUDGE_VERSION, SYSTEM, judge, prompt, files, hash_file(case.rubric_path)])


def check_cache(cache: Any, path: Path) -> dict[str, list[dict[str, Any]]]:
    """The calibration cache read from `path`: each key's scored samples (LlmttError saying
    to remove it when it is not that)."""
    if not isinstance(cache, dict) or not all(
        isinstance(samples, list)
        and all(isinstance(s, dict) and _number(s.get("weighted_score")) for s in samples)
        for samples in cache.values()
    ):
        raise LlmttError(f"{path} is damaged: remove it (the next run asks again)")
    return cache


Ask = Callable[[Case, str], dict[str, Any]]


def calibrate(
    cases: list[Case],
    model: ResolvedModel,
    prompts: dict[str, str],
    cache: dict[str, Any],
    ask: Ask,
    samples: int,
    budget: float | None,
) -> dict[str, Any]:
    """Score each case (`samples` times, the mean), from `cache` where it can, asking `ask`
    otherwise while `budget` allows; the record of calibration.json. `cache` gains what was
    paid for."""
    spent = 0.0
    rows = []
    for case in cases:
        prompt = prompts[case.name]
        key = case_key(case, model, prompt)
        # Every scored sample stays cached: lowering `samples`, then raising it, pays nothing.
        stored = [s for s in cache.get(key, []) if s.get("error") is None]
        kept = stored[:samples]
        fresh: list[dict[str, Any]] = []
        why = None
        while len(kept) + len(fresh) < samples:
            if budget is not None and spent + hold_for(model, prompt) > budget:
                why = f"budget exhausted: spent ${spent:.6f} of ${budget:.6f}"
                break
            sample = ask(case, prompt)
            spent += sample.get("cost_usd") or 0.0
            fresh.append(sample)
            if sample.get("error"):
                why = sample["error"]
                break
        cache[key] = stored + [s for s in fresh if s.get("error") is None]
        rows.append(_row(case, kept, fresh, why))
    return _summary(model, rows, spent)


def _row(
    case: Case, kept: list[dict[str, Any]], fresh: list[dict[str, Any]], why: str | None
) -> dict[str, Any]:
    scored = [*kept, *(s for s in fresh if s.get("error") is None)]
    row: dict[str, Any] = {
        "case": case.name,
        "expected": case.expected,
        "band": list(case.band),
        "requests": sum(s.get("attempts", 0) for s in fresh),
        "cost_usd": round(sum(s.get("cost_usd") or 0.0 for s in fresh), 8),
        "cached": len(kept),
    }
    if why is not None:
        row.update({"score": None, "in_band": None, "error": why})
        return row
    score = round(statistics.fmean(s["weighted_score"] for s in scored), 6)
    row.update(
        {
            "score": score,
            "samples": [s["weighted_score"] for s in scored],
            "in_band": case.band[0] <= score <= case.band[1],
            "error": None,
        }
    )
    return row


def _summary(model: ResolvedModel, rows: list[dict[str, Any]], spent: float) -> dict[str, Any]:
    scored = [r for r in rows if r["score"] is not None]
    judged = statistics.fmean(r["score"] for r in scored) if scored else None
    wanted = statistics.fmean(r["expected"] for r in scored) if scored else None
    return {
        "format": CALIBRATION_FORMAT,
        "model": model.name,
        "judge_version": JUDGE_VERSION,
        "cases": rows,
        "in_band": sum(r["in_band"] is True for r in rows),
        "out_of_band": sum(r["in_band"] is False for r in rows),
        "not_scored": len(rows) - len(scored),
        # Positive: the judge scores higher than people expect (too lenient).
        "leniency": None if judged is None or wanted is None else round(judged - wanted, 6),
        "mean_absolute_error": round(
            statistics.fmean(abs(r["score"] - r["expected"]) for r in scored), 6
        )
        if scored
        else None,
        "requests": sum(r["requests"] for r in rows),
        "cost_usd": round(spent, 8),
    }
