"""Which runs of a plan to make: the doit variables, as a value (no heavy imports)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Selection:
    """Which runs to plan: filters and axis overrides (doit variables)."""

    scenarios: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    tiers: tuple[int, ...] = ()
    agents: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    repeats: int | None = None

    def describe(self) -> str:
        """The selection as the doit variables that made it."""
        parts = []
        for name in ("scenarios", "tags", "tiers", "agents", "models", "variants"):
            values = getattr(self, name)
            if values:
                parts.append(f"{name[:-1]}={','.join(str(v) for v in values)}")
        if self.repeats is not None:
            parts.append(f"repeats={self.repeats}")
        return " ".join(parts)
