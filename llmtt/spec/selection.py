"""Which runs of a plan to make: the doit variables, as a value (no heavy imports)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from llmtt.errors import LlmttError

# Every `name=value` llmtt reads from a doit command line; any other name is a typo.
VARIABLES = (
    "scenario",
    "tag",
    "tier",
    "agent",
    "model",
    "variant",
    "repeats",
    "budget",
    "executor",
    "jobs",
)


@dataclass(frozen=True)
class Selection:
    """Which runs to plan: filters and axis overrides (doit variables)."""

    scenarios: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    # tier=N is the seed's `--tier N`: tiers 0 to N (0 = smoke, 1 = smoke + quick, ...);
    # tier=A-B is tiers A to B, so tier=1-1 is tier 1 alone. Each is (lowest, highest).
    tiers: tuple[tuple[int, int], ...] = ()
    agents: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    repeats: int | None = None
    # repeats=auto: the comparisons' repeats go in rounds ([compare] round_repeats, up to
    # max_repeats) until each scenario's verdicts are decided; `rounds` holds, per scenario
    # compared, the repeats of the round under way (set by the session from the results, never
    # typed); None while they are not known (the plan of every repeat they may take).
    adaptive: bool = False
    rounds: tuple[tuple[str, int], ...] | None = None

    @classmethod
    def from_variables(cls, values: Mapping[str, str]) -> Selection:
        """The selection a doit command line's variables make (`budget`, `executor` and
        `jobs` are read elsewhere)."""
        for name in sorted(values):
            if name not in VARIABLES:
                raise LlmttError(
                    f"unknown variable {name}={values[name]}{nearest(name, VARIABLES)} "
                    f"(llmtt's variables: {', '.join(VARIABLES)})"
                )

        def names(var: str) -> tuple[str, ...]:
            value = values.get(var)
            return tuple(v.strip() for v in value.split(",") if v.strip()) if value else ()

        adaptive = values.get("repeats", "").strip() == "auto"
        try:
            tiers = tuple(_tier_range(t) for t in names("tier"))
            repeats = int(values["repeats"]) if values.get("repeats") and not adaptive else None
            if repeats is not None and repeats < 1:
                raise ValueError(repeats)
        except ValueError:
            raise LlmttError(
                "tier= takes a whole number N (tiers 0 to N) or a range A-B (tiers A to B), and "
                "repeats= a whole number >= 1 or auto (e.g. tier=1 tier=2-2 repeats=3)"
            ) from None
        return cls(
            scenarios=names("scenario"),
            tags=names("tag"),
            tiers=tiers,
            agents=names("agent"),
            models=names("model"),
            variants=names("variant"),
            repeats=repeats,
            adaptive=adaptive,
        )

    def describe(self) -> str:
        """The selection as the doit variables that made it."""
        parts = []
        for name in ("scenarios", "tags", "tiers", "agents", "models", "variants"):
            values = getattr(self, name)
            if name == "tiers":
                values = [tier_text(t) for t in values]
            if values:
                parts.append(f"{name[:-1]}={','.join(str(v) for v in values)}")
        if self.repeats is not None:
            parts.append(f"repeats={self.repeats}")
        if self.adaptive:
            parts.append("repeats=auto")
        return " ".join(parts)

    def tier_selected(self, tier: int) -> bool:
        """Whether a scenario of `tier` is selected (every tier when tier= is not given)."""
        return not self.tiers or any(lo <= tier <= hi for lo, hi in self.tiers)

    def repeats_of(self, scenario: str) -> int | None:
        """The repeats of this round of repeats=auto for a scenario that is compared (None: not
        known yet, or a scenario not compared)."""
        return dict(self.rounds or ()).get(scenario)


def tier_text(tiers: tuple[int, int]) -> str:
    """A tier range as tier= takes it: `N` for 0 to N, else `A-B`."""
    lo, hi = tiers
    return str(hi) if lo == 0 else f"{lo}-{hi}"


def _tier_range(text: str) -> tuple[int, int]:
    """`N` -> (0, N); `A-B` -> (A, B) (ValueError: neither, or A > B)."""
    low, dash, high = text.partition("-")
    lo, hi = (int(low), int(high)) if dash else (0, int(low))
    if lo < 0 or hi < lo:
        raise ValueError(text)
    return lo, hi


def nearest(name: str, known: Iterable[str]) -> str:
    """`; did you mean 'X'?` for the known name closest to `name`, or nothing."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else ""


def listing(names: Iterable[object], most: int = 12) -> str:
    """Sorted names, comma-separated, the tail cut past `most`."""
    shown = sorted({str(n) for n in names})
    if len(shown) > most:
        return ", ".join(shown[:most]) + f", ... ({len(shown) - most} more)"
    return ", ".join(shown) or "none"


def check_info(names: Iterable[str], tasks: Iterable[str], selection: Selection) -> None:
    """`doit info NAME` of a task the loaded plan lacks: one line naming the nearest task
    (doit itself would end in a KeyError's traceback). `names` are doit info's task names."""
    known = set(tasks)
    for name in names:
        if name not in known:
            chosen = selection.describe()
            scope = f"the runs that {chosen} selects" if chosen else "this project's runs"
            raise LlmttError(
                f"doit info {name}: not a task of {scope}{nearest(name, known)} "
                "(`doit list --all` shows them)"
            )
