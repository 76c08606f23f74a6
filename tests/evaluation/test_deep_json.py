"""JSON nested too deep for Python's json, from outside llmtt (a command's output, a script's,
a judge model's answer, an agent's text): Python's json raises RecursionError, not ValueError,
and each reader used to fail its layer with a traceback (a judge's paid answer lost with it).
Each says the text is not JSON it can read, as for any other text that is not JSON."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import TypeAdapter

from llmtt.evaluation.evaluators.llm_judge import parse
from llmtt.evaluation.gates import GateContext, run_gates
from llmtt.evaluation.judge import parse_answer
from llmtt.evaluation.scripts import json_object
from llmtt.spec.gates import Gate
from llmtt.spec.rubric import Rubric

DEPTH = 100_000
DEEP = "[" * DEPTH + "]" * DEPTH
DEEP_OBJECT = '{"score": 1, "x": ' + DEEP + "}"
# The same from bash, without another interpreter.
PRINT_DEEP = f"printf '%*s' {DEPTH} '' | tr ' ' '['; printf '%*s' {DEPTH} '' | tr ' ' ']'"


def test_a_json_path_gate_on_output_nested_too_deep_fails_the_gate(tmp_path: Path) -> None:
    gate = TypeAdapter(Gate).validate_python(
        {"type": "command_json_path", "command": PRINT_DEEP, "path": "$", "assertion": "exists"}
    )
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    [result] = run_gates([gate], GateContext(tmp_path, env, 30, []))
    assert result["passed"] is False
    assert "is JSON nested too deep to read" in result["message"]


def test_a_script_printing_json_nested_too_deep_has_no_result() -> None:
    data, why = json_object(DEEP_OBJECT)
    assert data is None and why is not None and why.startswith("stdout is not JSON")


def test_a_judge_answer_nested_too_deep_is_an_invalid_answer() -> None:
    rubric = Rubric.model_validate({"criteria": [{"id": "a", "weight": 1, "description": "x"}]})
    answer, problem = parse_answer(DEEP_OBJECT, rubric)
    assert answer is None and problem is not None and problem.startswith("invalid JSON")
    found, why = parse(DEEP_OBJECT, "binary")
    assert found is None and why == 'not a JSON object with "score"'


def test_a_json_path_gate_on_output_just_readable_never_fails_the_layer(tmp_path: Path) -> None:
    """Just under Python's nesting limit the output is read, and then walking, comparing or
    showing it can still raise RecursionError: the gate fails saying so instead."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    gate_of = TypeAdapter(Gate).validate_python
    for depth in range(940, 1001, 4):
        deep = f"printf '%*s' {depth} '' | tr ' ' '['; printf '%*s' {depth} '' | tr ' ' ']'"
        spec = {"type": "command_json_path", "command": deep, "path": "$", "assertion": "len == 1"}
        [result] = run_gates([gate_of(spec)], GateContext(tmp_path, env, 30, []))
        message = result["message"]
        readable = "holds" in message or "fails" in message
        assert readable or "nested too deep to read" in message or "too deep to check" in message
