"""Layers carried out on another machine: what a node is sent, what it does, what comes back.

The controller (the `doit run` process) keeps the plan, the keys, doit's dependency file, the
budget ledger, the results store and the reports. A node is sent the project folder as one
archive (once per invocation; unpacked once per node) and one `Job`: a layer of one run, named
and keyed. It loads that run's scenario alone from its copy, checks that the run's keys come out
as they did on the controller (same inputs, same llmtt, agent and target versions), carries the
layer out in a results folder of its own and sends the run folder back as one archive. The
controller lands it in the run folder with the layer's last file (`run.json`, `result.json`)
written last, so a node lost at any moment leaves no half-written run behind, and no file system
is shared.

Nothing here imports Ray: `llmtt.executors.ray` moves these plain values.
"""

from __future__ import annotations

import fnmatch
import io
import os
import secrets
import shutil
import stat
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from llmtt.errors import LlmttError
from llmtt.util.atomic import read_jsonl
from llmtt.util.hashing import Key, hash_bytes

# Never sent: version control, installed packages, virtualenvs and caches. A node has its own
# agents and tools; the results folder is the controller's.
SKIPPED = (
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    ".venv",
    "venv",
    ".tox",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".llmtt",
)
PROJECT_LIMIT = 512 * 1024 * 1024  # bytes of project files sent to the nodes, at most
# The variables of the controller's invocation that a layer reads: the switch for paid runs
# (the node's own setting never counts), the invocation's label, the default judge.
PASSED_ENV = ("LLMTT_ENABLED", "LLMTT_LABEL", "LLMTT_JUDGE")
# The key variables a layer may read, sent when the controller has them (a node's own serve
# otherwise): the agent CLIs' own, besides each model's api_key_env and each agent's pass_env.
KEY_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "OPENROUTER_API_KEY",
    "GOOGLE_GENERATIVE_AI_API_KEY",
    "GEMINI_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
)
KEPT_BUNDLES_SECS = 24 * 3600  # a node removes unpacked projects unused for this long


class RemoteError(LlmttError):
    """A node cannot carry out a layer as the controller planned it."""


@dataclass(frozen=True)
class Job:
    """One layer of one run, as a node is asked to carry it out."""

    layer: str  # "agent" or "evaluate"
    run_id: str
    scenario: str  # the scenario file, relative to the project folder
    keys: dict[str, Key]  # the run's keys on the controller
    versions: dict[str, str]  # the controller's agent and target versions, for messages
    selection: dict[str, str]  # the doit command line's NAME=VALUE words
    project: str  # the digest of the project archive
    env: dict[str, str | None] = field(default_factory=dict)  # PASSED_ENV, as on the controller
    run_files: bytes | None = None  # evaluate: the run folder, as the agent layer left it


class LedgerAccess(Protocol):
    """The session budget as a node reaches it (see llmtt.execution.budget.Ledger)."""

    def reserve(self, key: str, amount: float) -> None:
        """Hold `amount` (BudgetExhausted when the budget cannot cover it)."""

    def guard(self, key: str) -> Callable[[float], str | None]:
        """A running step's check: given what it spent so far, why it must stop, or None."""

    def settle(self, key: str, cost: float | None, fallback: float) -> None:
        """Replace a hold by what was spent."""


class LedgerPurse:
    """The session ledger, for a run's evaluators that call a model."""

    def __init__(self, ledger: LedgerAccess, run_id: str) -> None:
        self.ledger = ledger
        self.prefix = f"{run_id}:evaluate:"

    def hold(self, name: str, amount: float) -> None:
        """Hold `amount` (BudgetExhausted when the budget cannot cover it)."""
        self.ledger.reserve(self.prefix + name, amount)

    def settle(self, name: str, cost: float | None, held: float) -> None:
        """Record what was spent; the hold goes."""
        self.ledger.settle(self.prefix + name, cost, held)


# --- archives ------------------------------------------------------------------------------


def pack_project(root: Path, results: Path, exclude: list[str]) -> tuple[str, bytes]:
    """The project folder as one archive, and its digest: everything but the results folder,
    SKIPPED and the user's `exclude` patterns (matched against names and relative paths)."""
    root = root.resolve()
    results = results.resolve()
    patterns = list(SKIPPED) + list(exclude)
    total = 0
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            kept = []
            for name in sorted(dirnames):
                full = here / name
                rel = full.relative_to(root).as_posix()
                if full == results or _matches(name, rel, patterns):
                    continue
                if full.is_symlink():
                    tar.add(full, rel, recursive=False)
                else:
                    kept.append(name)
            dirnames[:] = kept
            for name in sorted(filenames):
                full = here / name
                rel = full.relative_to(root).as_posix()
                if _matches(name, rel, patterns):
                    continue
                if not full.is_symlink():
                    total += full.stat().st_size
                    if total > PROJECT_LIMIT:
                        raise LlmttError(
                            f"the project folder {root} holds more than "
                            f"{PROJECT_LIMIT // 2**20} MB to send to the Ray nodes (reached at "
                            f"{rel}); add what the runs do not need to [executor] exclude in "
                            "llmtt.toml"
                        )
                tar.add(full, rel, recursive=False)
    data = buffer.getvalue()
    return hash_bytes(data), data


def _matches(name: str, rel: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(rel, p) for p in patterns)


def pack_dir(folder: Path, names: list[str] | None = None) -> bytes:
    """A folder's entries (`names`: only these top-level ones) as one archive."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for name in sorted(os.listdir(folder)) if names is None else sorted(names):
            tar.add(folder / name, name)
    return buffer.getvalue()


def unpack(archive: bytes, dest: Path) -> None:
    """Extract an archive that llmtt made into `dest`: nothing lands outside it, nothing is
    written through a link the archive itself made, no device files."""
    links: list[str] = []

    def checked(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        name = os.path.normpath(member.name)
        if name.startswith(("/", "..")) or any(
            name == link or name.startswith(link + os.sep) for link in links
        ):
            raise RemoteError(f"a returned archive holds an entry outside its folder: {name}")
        if member.issym() or member.islnk():
            links.append(name)
        if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
            return None
        if _HAS_FILTERS:
            return tarfile.tar_filter(member, path)
        return _tar_filter(member, path)

    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        if _HAS_FILTERS:
            tar.extractall(dest, filter=checked)
            return
        # Python before 3.11.4 (Debian 12's 3.11.2) has no extraction filters: the same checks,
        # member by member, then extraction of what passed.
        kept = [m for m in tar.getmembers() if checked(m, str(dest)) is not None]
        tar.extractall(dest, members=kept)


# Extraction filters came with Python 3.11.4 (PEP 706); `hasattr(tarfile, "data_filter")` is the
# test the docs give for them.
_HAS_FILTERS = hasattr(tarfile, "data_filter")


def _tar_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """What tarfile's `tar` filter does, for a Python without it: the entry must land inside
    `dest` once links already there are followed, and loses setuid, setgid, sticky and
    group/other write bits."""
    name = member.name.lstrip("/" + os.sep)
    root = os.path.realpath(dest)
    where = os.path.join(
        os.path.realpath(os.path.join(root, os.path.dirname(name))), os.path.basename(name)
    )
    if os.path.isabs(name) or os.path.commonpath([root, where]) != root:
        raise RemoteError(f"a returned archive holds an entry outside its folder: {member.name}")
    mode = member.mode & 0o7777 & ~(stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX)
    member.mode = mode & ~(stat.S_IWGRP | stat.S_IWOTH)
    member.name = name
    return member


def land(
    archive: bytes,
    run_dir: Path,
    first: list[str],
    last: str,
    after: Mapping[str, bytes] | None = None,
) -> list[str]:
    """Put what a node sent back into the run folder; return the names landed.

    Everything is unpacked beside the run folder first. Then the `first` names are removed
    (the files that mark the layer done, so that a kill from here on leaves the layer pending),
    every other returned entry replaces its namesake, and `last` lands last. A file named in
    `after` lands as what it holds there followed by what the node sent (the controller's
    record of attempts, then the node's line): whole, in one rename, whatever kills it.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    staging = run_dir.parent / f".{run_dir.name}.landing-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        unpack(archive, staging)
        for name, earlier in (after or {}).items():
            sent = staging / name
            if sent.is_file() and not sent.is_symlink():
                sent.write_bytes(earlier + sent.read_bytes())
            elif os.path.lexists(sent):  # not a file: the controller's record stays
                _remove(sent)
        names = sorted(os.listdir(staging))
        for name in first:
            _remove(run_dir / name)
        for name in [n for n in names if n != last] + ([last] if last in names else []):
            staged, there = staging / name, run_dir / name
            if _is_dir(there) or (_is_dir(staged) and os.path.lexists(there)):
                _remove(there)  # else a file replaces its namesake in one rename, whole
            os.replace(staged, there)
        return names
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _is_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _remove(path: Path) -> None:
    if _is_dir(path):
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


# --- on a node -----------------------------------------------------------------------------


def node_dir() -> Path:
    """Where a node keeps unpacked projects and the folders of the layers under way."""
    base = os.environ.get("LLMTT_REMOTE_DIR") or os.path.join(
        tempfile.gettempdir(), f"llmtt-remote-{os.getuid()}"
    )
    return Path(base)


def unpacked(digest: str, archive: bytes) -> Path:
    """The project archive unpacked on this node, once (concurrent layers share it)."""
    bundles = node_dir() / "projects"
    root = bundles / digest
    if not root.is_dir():
        bundles.mkdir(parents=True, exist_ok=True)
        staging = bundles / f".{digest}.{secrets.token_hex(4)}"
        staging.mkdir()
        try:
            unpack(archive, staging)
            os.rename(staging, root)
        except OSError:
            if not root.is_dir():  # not another layer's unpacking that won the race
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        _forget_old(bundles, keep=root)
    os.utime(root)
    return root


def _forget_old(bundles: Path, keep: Path) -> None:
    cutoff = time.time() - KEPT_BUNDLES_SECS
    for entry in bundles.iterdir():
        try:
            if entry != keep and entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            pass


def key_names(project: Any) -> list[str]:
    """The variables holding keys that a project's layers may read (and those its targets'
    env values name: a node expands them as the controller would)."""
    config = project.config
    names = [m.api_key_env for m in config.models.values() if m.api_key_env]
    names += [n for a in config.agents.values() for n in a.pass_env]
    names += project.referenced_variables()
    return sorted(set(names) | set(KEY_ENV))


@contextmanager
def _passed_env(env: dict[str, str | None], keys: dict[str, str]) -> Iterator[None]:
    """While a layer works (a Ray worker carries out one task at a time): the controller's
    LLMTT_* variables in place of this node's, and the keys the controller has."""
    saved = {name: os.environ.get(name) for name in (*PASSED_ENV, *keys)}
    try:
        for name in PASSED_ENV:
            value = env.get(name)
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        os.environ.update(keys)
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def carry_out(
    job: Job, archive: bytes, ledger: LedgerAccess | None, node: str, keys: dict[str, str]
) -> dict[str, Any]:
    """On a node (`node` names it in run.json): carry out one layer of one run with the
    controller's `keys` in its environment; return the run folder and what the layer appended
    to the results store. Raises RemoteError when the node's plan differs."""
    from llmtt.process import watchdog

    # The processes a run starts end with this worker, however it ends (Ray may kill it).
    watchdog.start()
    root = unpacked(job.project, archive)
    task = Path(".llmtt-remote") / secrets.token_hex(8)
    try:
        with _passed_env(job.env, keys):
            return _carry_out(job, root, task, ledger, node)
    finally:
        shutil.rmtree(root / task, ignore_errors=True)


def _carry_out(
    job: Job, root: Path, task: Path, ledger: LedgerAccess | None, node: str
) -> dict[str, Any]:
    from llmtt.evaluation.evaluate import evaluate_run
    from llmtt.execution.agent_layer import execute_run
    from llmtt.results.store import ResultsStore
    from llmtt.util.atomic import write_json

    project, run = node_run(root, job, task)
    if job.layer == "agent":
        guard = ledger.guard(f"{run.run_id}:agent") if ledger is not None else None
        record = {**execute_run(project, run, session_budget=guard), "executed_on": node}
        write_json(run.dir / "run.json", record)
        return {"files": pack_dir(run.dir), "value": record, "records": {}}
    assert job.run_files is not None
    run.dir.mkdir(parents=True)
    unpack(job.run_files, run.dir)
    before = _tops(run.dir)
    purse = LedgerPurse(ledger, run.run_id) if ledger is not None else None
    store = ResultsStore(project.results_dir, project.redactor())
    value = evaluate_run(project, run, store, purse)
    after = _tops(run.dir)
    changed = [name for name, stamp in after.items() if before.get(name) != stamp]
    records = {
        name: read_jsonl(project.results_dir / name)
        for name in ("evaluations.jsonl", "results.jsonl")
    }
    return {"files": pack_dir(run.dir, changed), "value": value, "records": records}


def _tops(folder: Path) -> dict[str, tuple[int, int]]:
    """Each top-level entry's newest change, and its size (files) or entry count (folders)."""
    out = {}
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            newest, count = entry.stat(follow_symlinks=False).st_mtime_ns, 0
            for dirpath, dirnames, filenames in os.walk(entry.path):
                for name in dirnames + filenames:
                    newest = max(newest, os.lstat(os.path.join(dirpath, name)).st_mtime_ns)
                    count += 1
            out[entry.name] = (newest, count)
        else:
            info = entry.stat(follow_symlinks=False)
            out[entry.name] = (info.st_mtime_ns, info.st_size)
    return out


def node_run(root: Path, job: Job, task: Path) -> tuple[Any, Any]:
    """The project and run behind a job on this node, its results in the folder `task`;
    RemoteError when its keys differ from the controller's."""
    from llmtt.execution import isolation
    from llmtt.plan.cache import RunSpec
    from llmtt.plan.runs import build_plan
    from llmtt.spec.project import load_project
    from llmtt.spec.selection import Selection

    project = load_project(root, only=root / job.scenario)
    isolation.check(project.config)  # this node confines its runs as the controller's would
    paths = project.config.paths.model_copy(update={"results": str(task)})
    project = replace(project, config=project.config.model_copy(update={"paths": paths}))
    plan = build_plan(project, Selection.from_variables(job.selection), part=True)
    run = next((r for r in plan.runs if r.run_id == job.run_id), None)
    if run is None:
        raise RemoteError(f"{job.run_id} is not planned from this node's copy of the project")
    keys = RunSpec.of(run).keys
    if keys != job.keys:
        raise RemoteError(f"{job.run_id}: {differences(job, run, keys)}")
    return project, run


def differences(job: Job, run: Any, keys: dict[str, Key]) -> str:
    """What differs between the controller's keys of a run and this node's, in words."""
    parts = sorted(
        {
            f"{layer}.{part}"
            for layer in set(keys) | set(job.keys)
            for part in set(keys.get(layer, {})) | set(job.keys.get(layer, {}))
            if keys.get(layer, {}).get(part) != job.keys.get(layer, {}).get(part)
        }
    )
    said = []
    for name, here in (("agent", run.agent_version), ("target", run.target_version)):
        there = job.versions.get(name)
        if there != here:
            said.append(f"{name} version {here!r} on this node, {there!r} on the controller")
    return (
        "this node's plan differs from the controller's ("
        + "; ".join(said + [f"key parts {', '.join(parts)}"])
        + "): install the same llmtt, agent and target versions on every node"
    )
