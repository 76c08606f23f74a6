"""What `llmtt lint` found: findings with a level, a check id and a place, and the report that
holds them (written as text for people and as JSON for programs and the aggregate report)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from llmtt.plan.runs import LINT_FILE

__all__ = ["LINT_FILE", "Finding", "LintReport", "at_least"]

Level = Literal["info", "warning", "error"]
LEVELS: tuple[Level, ...] = ("info", "warning", "error")
LINT_FORMAT = 1

# Every check, with the level of its findings and what it means (README's "llmtt lint" table
# is written from the same words).
CHECKS: dict[str, tuple[Level, str]] = {
    "help-missing": ("error", "the subcommand gives no help (--help, -h and `help` fail)"),
    "help-example": ("warning", "its help shows no example"),
    "machine-output": ("info", "its help offers no machine-readable output (--json, ...)"),
    "help-length": ("warning", "its help is longer than the bound (--max-help-tokens)"),
    "waits-for-input": ("error", "it waits for input when stdin is not a terminal"),
    "pager": ("error", "it starts a pager ($PAGER) though its output is not a terminal"),
    "editor": ("error", "it opens an editor ($EDITOR) though stdin is not a terminal"),
    "wrong-call-exit": ("error", "a wrong invocation (unknown flag, missing argument) exits 0"),
    "wrong-call-hint": ("warning", "a wrong invocation prints nothing that helps"),
    "error-length": ("warning", "its error text is longer than the bound (--max-error-tokens)"),
    "guidance-size": ("warning", "the guidance file is longer than the bound"),
    "unknown-command": ("error", "the guidance names a subcommand the tool does not have"),
    "unknown-flag": ("warning", "the guidance uses an option the tool's help does not name"),
    "example-fails": ("error", "a shell example of the guidance exits non-zero in a fixture"),
    "example-setup": ("info", "a scenario's setup failed: its fixture ran no example"),
    "leak-text": ("warning", "a gate's expected text appears verbatim in the prompt or guidance"),
    "leak-solution": ("warning", "a solution command appears verbatim in the prompt or guidance"),
    "leak-path": ("info", "a gate's path appears verbatim in the prompt or guidance"),
}


@dataclass(frozen=True)
class Finding:
    """One thing to fix, where it is, and what was seen."""

    check: str
    message: str
    target: str | None = None  # the tool, for findings about it
    subcommand: str | None = None  # None: the tool itself (or not about the tool)
    file: str | None = None  # a guidance or scenario file, relative to the project
    line: int | None = None
    scenario: str | None = None

    @property
    def level(self) -> Level:
        """The check's level."""
        return CHECKS[self.check][0]

    def where(self) -> str:
        """Where it is, as the text output starts its line."""
        if self.file is not None:
            return self.file + (f":{self.line}" if self.line else "")
        if self.target is not None:
            return self.target + (f" {self.subcommand}" if self.subcommand else "")
        return self.scenario or "project"

    def as_json(self) -> dict[str, Any]:
        """The finding as report.json and lint.json hold it (with its level)."""
        return {"level": self.level, **{k: v for k, v in asdict(self).items() if v is not None}}


def at_least(level: Level, bound: Level) -> bool:
    """Whether `level` is `bound` or above it."""
    return LEVELS.index(level) >= LEVELS.index(bound)


@dataclass
class LintReport:
    """Everything one `llmtt lint` saw: per target its subcommands, per guidance file its size
    and examples, and the findings."""

    confined: bool
    targets: list[dict[str, Any]] = field(default_factory=list)
    guidance: list[dict[str, Any]] = field(default_factory=list)
    scenarios: list[dict[str, Any]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Findings per level."""
        return {level: sum(f.level == level for f in self.findings) for level in LEVELS}

    def as_json(self) -> dict[str, Any]:
        """lint.json and `llmtt lint --json`."""
        return {
            "format": LINT_FORMAT,
            "confined": self.confined,
            "counts": self.counts(),
            "targets": self.targets,
            "guidance": self.guidance,
            "scenarios": self.scenarios,
            "findings": [f.as_json() for f in self.findings],
        }

    def as_text(self, shown: Level = "info") -> str:
        """One line a finding at `shown` or above, grouped by place, then the counts."""
        lines: list[str] = []
        for target in self.targets:
            subs = target["subcommands"]
            lines.append(
                f"target {target['binary']}: {len(subs)} subcommand{'s' * (len(subs) != 1)} "
                f"read ({', '.join(s['name'] for s in subs) or 'none: the tool itself'})"
            )
        for file in self.guidance:
            examples = file["examples"]
            failed = sum(1 for e in examples if e["exit_code"] != 0)
            lines.append(
                f"guidance {file['file']}: about {file['tokens']} tokens; "
                f"{len(examples)} example run{'s' * (len(examples) != 1)}, {failed} failed"
            )
        if not self.confined:
            lines.append(
                "unconfined: the probes and examples ran without the sandbox "
                "([isolation] mode or LLMTT_ISOLATION is none)"
            )
        lines.append("")
        for finding in sorted(self.findings, key=_order):
            if at_least(finding.level, shown):
                lines.append(
                    f"{finding.where()}: {finding.level}: {finding.message} [{finding.check}]"
                )
        counts = self.counts()
        lines.append(
            ", ".join(
                _plural(counts[level], word)
                for level, word in (("error", "error"), ("warning", "warning"), ("info", "note"))
            )
        )
        return "\n".join(lines) + "\n"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' * (count != 1)}"


def _order(finding: Finding) -> tuple[Any, ...]:
    """The tool's findings first, by subcommand; then the files', by line."""
    return (
        finding.target is None,
        finding.target or "",
        finding.subcommand or "",
        finding.file or "",
        finding.line or 0,
        -LEVELS.index(finding.level),
        finding.check,
    )
