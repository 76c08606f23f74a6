"""docs/reference.md is generated from the models, and every field it lists is described."""

from __future__ import annotations

from pathlib import Path

from llmtt.commands.reference import (
    DEFAULT_OUT,
    builtin_evaluators,
    main,
    missing_descriptions,
    render,
)

ROOT = Path(__file__).resolve().parents[2]


def test_every_field_has_a_description() -> None:
    missing = missing_descriptions()
    assert not missing, (
        "fields without a description (add description= to their Field(...)):\n  "
        + "\n  ".join(missing)
    )


def test_committed_reference_is_up_to_date() -> None:
    assert DEFAULT_OUT == ROOT / "docs" / "reference.md"
    assert DEFAULT_OUT.read_text(encoding="utf-8") == render(), (
        "docs/reference.md is out of date: run `python -m llmtt.commands.reference` and commit it"
    )


def test_reference_covers_every_builtin_evaluator_and_gate() -> None:
    text = render()
    assert set(builtin_evaluators()) >= {"rule_based", "llm_judge", "nlp_accuracy", "toxicity"}
    for type_id in builtin_evaluators():
        assert f"`evaluation.evaluators[type={type_id}].config`" in text
    for gate in ("command_succeeds", "file_matches", "script", "evaluator", "check"):
        assert f"`evaluation.gates[type={gate}]`" in text
    assert "(metrics.md)" in text  # the metric definitions are linked


def test_check_mode_reports_a_stale_file(tmp_path: Path) -> None:
    out = tmp_path / "reference.md"
    assert main(["--check", "--out", str(out)]) == 1
    assert main(["--out", str(out)]) == 0
    assert main(["--check", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == render()


def test_docs_link_the_reference() -> None:
    assert "(docs/reference.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(reference.md)" in (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
