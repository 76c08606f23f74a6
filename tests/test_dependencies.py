"""What pyproject.toml declares and what requirements/*.txt lock: the locks are fresh, complete
and consistent, every file in them is hash-checked, each declared dependency is used, the dev
tools are pinned exactly, and no release known to be bad is locked."""

from __future__ import annotations

import ast
import importlib.util
import re
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXAMPLE = ROOT / "requirements" / "example.txt"
TEST = ROOT / "requirements" / "test.txt"
# Releases of litellm that were compromised on PyPI (1.82.7, 1.82.8) or reported so (1.107.0).
BAD = {"litellm": {"1.82.7", "1.82.8", "1.107.0"}}


def lockfile() -> ModuleType:
    """scripts/lockfile.py, the parser scripts/setup itself uses."""
    spec = importlib.util.spec_from_file_location("lockfile", ROOT / "scripts" / "lockfile.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pins(lock: Path) -> dict[str, list[tuple[str, str]]]:
    """Name -> [(version, marker)] for each entry of a lock (two under exclusive markers)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for name, entry in lockfile().entries(lock).items():
        for line in entry.splitlines():
            if not line.startswith(" "):
                match = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+?)(?: ; (.*?))? \\", line)
                assert match, f"{lock.name}: not a pinned requirement: {line!r}"
                found.setdefault(name, []).append((match[2], match[3] or ""))
    return found


def declared(extras: list[str]) -> list[Requirement]:
    """The runtime dependencies, these extras' and the build requirements, as pyproject.toml says."""
    project = PYPROJECT["project"]
    texts = list(project["dependencies"]) + list(PYPROJECT["build-system"]["requires"])
    wanted, seen = list(extras), set()
    while wanted:
        extra = wanted.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in project["optional-dependencies"][extra]:
            requirement = Requirement(text)
            if requirement.name == "llmtt":  # an extra made of others (dev has llmtt[litellm])
                wanted += sorted(requirement.extras)
            else:
                texts.append(text)
    return [Requirement(text) for text in texts]


def test_both_locks_were_made_from_pyproject_as_it_is() -> None:
    assert lockfile().check([EXAMPLE, TEST]) == 0, "run scripts/lock"


def test_a_stale_lock_is_refused_with_the_command_that_fixes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "test.txt"
    stale.write_text(TEST.read_text().replace(lockfile().digest(), "0" * 64))
    assert lockfile().check([stale]) == 1
    assert "run scripts/lock" in capsys.readouterr().err


def test_every_locked_file_is_hash_checked() -> None:
    for lock in (EXAMPLE, TEST):
        entries = lockfile().entries(lock)
        assert len(entries) > 20, f"{lock.name}: {len(entries)} entries"
        for name, entry in entries.items():
            assert "--hash=sha256:" in entry, f"{lock.name}: {name} has no hash"


def test_the_example_lock_is_the_test_lock_cut_down_to_what_the_example_needs() -> None:
    example, test = lockfile().entries(EXAMPLE), lockfile().entries(TEST)
    assert example.keys() < test.keys()
    for name, entry in example.items():
        assert entry == test[name], f"{name}: example.txt and test.txt disagree"
    assert {"ray", "scipy", "pytest", "mypy"} <= test.keys() - example.keys()


def test_each_lock_satisfies_what_pyproject_declares_for_its_set_up() -> None:
    for lock, extras in ((EXAMPLE, ["examples"]), (TEST, ["examples", "dev", "ray"])):
        locked = pins(lock)
        for requirement in declared(extras):
            name = canonicalize_name(requirement.name)
            assert name in locked, f"{lock.name} lacks {requirement}: run scripts/lock"
            for version, _ in locked[name]:
                assert requirement.specifier.contains(version, prereleases=True), (
                    f"{lock.name}: {name}=={version} is outside {requirement}: run scripts/lock"
                )
        # The build tools scripts/setup installs first, before anything is built.
        assert {"setuptools", "wheel"} <= locked.keys()


def test_no_release_known_to_be_bad_is_declared_or_locked() -> None:
    for name, versions in pins(TEST).items():
        bad = {version for version, _ in versions} & BAD.get(name, set())
        assert not bad, f"requirements/test.txt locks {name} {bad}"
    pinned = [r for r in declared(["examples", "dev", "ray"]) if r.name == "litellm"]
    assert pinned and not any(pinned[0].specifier.contains(v) for v in BAD["litellm"])
    source = (ROOT / "pyproject.toml").read_text()
    assert all(version in source for version in BAD["litellm"]), "name them beside the pin"


def test_dev_tools_are_pinned_exactly() -> None:
    dev = [Requirement(text) for text in PYPROJECT["project"]["optional-dependencies"]["dev"]]
    assert dev
    assert "litellm" in {r.name for r in declared(["dev"])}  # the tests need the extra too
    for requirement in (r for r in dev if r.name != "llmtt"):
        (spec,) = requirement.specifier
        assert spec.operator == "==", f"dev extra: pin {requirement.name} with =="


def imported_names() -> set[str]:
    """Top-level modules llmtt imports anywhere (in functions too), or names as a string
    constant (importlib.resources.files("afinn"))."""
    names: set[str] = set()
    for path in (ROOT / "llmtt").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)
    return names


def test_every_runtime_dependency_is_used() -> None:
    used = imported_names()
    modules: dict[str, set[str]] = {}
    for module, distributions in packages_distributions().items():
        for distribution in distributions:
            modules.setdefault(canonicalize_name(distribution), set()).add(module)
    runtime = [Requirement(text) for text in PYPROJECT["project"]["dependencies"]]
    assert runtime
    for requirement in runtime:
        name = canonicalize_name(requirement.name)
        assert name in modules, f"{name} is declared but not installed: run scripts/setup test"
        assert modules[name] & used, f"{name} is declared in pyproject.toml; llmtt never imports it"
