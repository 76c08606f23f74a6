"""The hashed lock files in requirements/, for scripts/lock and scripts/setup.

Runs on any Python 3.11+ with the standard library alone: scripts/setup calls it before the
virtualenv has anything installed.

    python3 scripts/lockfile.py digest                  # what the locks were made from
    python3 scripts/lockfile.py stamp LOCK              # write that digest into LOCK's header
    python3 scripts/lockfile.py check LOCK...           # exit 1, naming the fix, if a lock is stale
    python3 scripts/lockfile.py pick LOCK NAME...       # LOCK's entries for NAME..., with hashes
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIGEST_LINE = "# inputs sha256: "
HEADER = (
    "# llmtt's lock: made by scripts/lock from pyproject.toml, never by hand. setuptools and\n"
    "# wheel build llmtt and afinn's sdist: scripts/setup installs them first, then the rest\n"
    "# with --require-hashes --no-build-isolation, so every file installed is checked here.\n"
    "# The digest of pyproject.toml's requires-python, dependencies, extras and build\n"
    "# requirements this lock was made from (scripts/setup refuses a lock made from others):\n"
)


def digest(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """sha256 of what a lock is made from; a change elsewhere in pyproject.toml keeps it."""
    data = tomllib.loads(pyproject.read_text())
    project = data["project"]
    inputs = {
        "requires-python": project.get("requires-python"),
        "dependencies": project.get("dependencies", []),
        "optional-dependencies": project.get("optional-dependencies", {}),
        "build-system": data.get("build-system", {}).get("requires", []),
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def entries(lock: Path) -> dict[str, str]:
    """Each package's entry (requirement, marker and hash lines), by normalised name.

    A universal lock may hold one package twice, under exclusive markers (scipy by Python
    version): those entries are kept together."""
    found: dict[str, str] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", lock.read_text()):
        if block.startswith("#") or not block.strip():
            continue
        lines = [line for line in block.splitlines() if not line.lstrip().startswith("#")]
        name = normalise(re.split(r"[=<>!~;\s\[]", lines[0], maxsplit=1)[0])
        found[name] = (found[name] + "\n" if name in found else "") + "\n".join(lines)
    return found


def normalise(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def stamp(lock: Path) -> None:
    """Put the header and the current digest at the top of a lock uv just wrote."""
    body = [line for line in lock.read_text().splitlines() if not line.startswith("# ")]
    kept = "\n".join(line for line in body if line != "#")
    lock.write_text(HEADER + DIGEST_LINE + digest() + "\n" + kept.lstrip("\n") + "\n")


def check(locks: list[Path]) -> int:
    """0 when every lock was made from pyproject.toml as it is; else 1, saying what to run."""
    want = digest()
    for lock in locks:
        if not lock.is_file():
            print(f"setup: {lock} is missing: run scripts/lock", file=sys.stderr)
            return 1
        have = [line for line in lock.read_text().splitlines() if line.startswith(DIGEST_LINE)]
        if have != [DIGEST_LINE + want]:
            print(
                f"setup: {lock} was not made from pyproject.toml's dependencies as they are now:"
                " run scripts/lock, and commit the lock with pyproject.toml",
                file=sys.stderr,
            )
            return 1
    return 0


def pick(lock: Path, names: list[str]) -> int:
    """Print LOCK's entries for NAMES, a requirements file pip can check hashes from."""
    found = entries(lock)
    missing = [name for name in names if normalise(name) not in found]
    if missing:
        print(f"setup: {lock} has no {', '.join(missing)}: run scripts/lock", file=sys.stderr)
        return 1
    print("\n".join(found[normalise(name)] for name in names))
    return 0


def main(argv: list[str]) -> int:
    """The command line above."""
    match argv:
        case ["digest"]:
            print(digest())
            return 0
        case ["stamp", lock]:
            stamp(Path(lock))
            return 0
        case ["check", *locks] if locks:
            return check([Path(lock) for lock in locks])
        case ["pick", lock, *names] if names:
            return pick(Path(lock), names)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
