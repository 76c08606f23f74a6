"""How a project's runs are confined: the sandbox every process of a run is started in, what
each phase of a run sees, and what it may reach on the network (DESIGN.md, "Confinement").

Every phase sees the system's programs read-only, and read-only the folders the tools it may
run live in: each folder on PATH (a virtualenv's bin: the whole virtualenv), this Python's
installation (without llmtt's own package), the agent CLI's install (its node_modules), the
target's program, and the user's `[isolation] read_only`. A folder on PATH that holds the user's
HOME, the project or its results is left out whole. Then, by phase: the setup and the agent see
the run's workspace and HOME read-write and the run's own /tmp; a gate or script sees its
scratch copy, the script file, and the run's event log and transcript read-only.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import llmtt
from llmtt.errors import LlmttError
from llmtt.process.sandbox.bwrap import Confinement, Sandbox, View, find_bwrap, unavailable
from llmtt.process.sandbox.relay import Relay, UnroutableHost, inside_address
from llmtt.process.shell import tool_path
from llmtt.spec.config import Config, NetworkPolicy
from llmtt.spec.scenario import SYSTEM_DIRS

MODE_ENV = "LLMTT_ISOLATION"
MODEL = "model"
HTTPS = 443
# How far above a program its node_modules or virtualenv is looked for
# (node_modules/@scope/package/bin/cli.js).
INSTALL_DEPTH = 5


class IsolationError(LlmttError):
    """Runs cannot be confined as configured: no sandbox here, or a policy it cannot keep."""


def mode(config: Config) -> str:
    """`bwrap` or `none`: LLMTT_ISOLATION, else `[isolation] mode`."""
    return effective_mode(config.isolation.mode)


def effective_mode(configured: str) -> str:
    """LLMTT_ISOLATION when set, else the `configured` mode."""
    given = os.environ.get(MODE_ENV, "").strip()
    if given and given not in ("bwrap", "none"):
        raise IsolationError(f'{MODE_ENV}={given} is not a mode: use "bwrap" or "none"')
    return given or configured


def check(config: Config) -> None:
    """Refuse (IsolationError, one line saying what to do) when runs must be confined and
    cannot be here."""
    check_mode(config.isolation.mode)


def check_mode(configured: str) -> None:
    """`check` for the `[isolation] mode` a plan was made with."""
    if effective_mode(configured) == "none":
        return
    why = unavailable(find_bwrap())
    if why is not None:
        raise IsolationError(why)


def record(config: Config) -> dict[str, object]:
    """What run.json says about the run's confinement."""
    if mode(config) == "none":
        return {"mode": "none"}
    network = config.isolation.network
    return {
        "mode": "bwrap",
        "network": {phase: getattr(network, phase) for phase in ("setup", "agent", "checks")},
    }


def sandbox(root: Path, results: Path, config: Config, *more: Path) -> Sandbox | None:
    """The project's sandbox, also showing `more` read-only (the agent's install, the target's
    program); None when runs are unconfined on purpose."""
    if mode(config) == "none":
        return None
    check(config)
    bwrap = find_bwrap()
    assert bwrap is not None  # check() said so
    extras = tuple(_user_path(root, p) for p in config.isolation.read_only)
    shared = tuple(_user_path(root, p) for p in config.isolation.read_write)
    return _sandbox(bwrap, root, results, extras, shared, more, tool_path(), Path.home())


@functools.lru_cache(maxsize=32)
def _sandbox(
    bwrap: str,
    root: Path,
    results: Path,
    extras: tuple[Path, ...],
    shared: tuple[Path, ...],
    more: tuple[Path, ...],
    path: str,
    home: Path,
) -> Sandbox:
    """`sandbox`'s work, once per process for the same folders and PATH (twice a run: its agent
    and its checks). Like `_tool_folders`, what it found installed is not looked for again."""
    project = (root.resolve(), results.resolve())
    keep_out = (home.resolve(), *project)
    seen = _tool_folders(path, keep_out, project)
    found = []
    for program in (p for p in more if not _under_system(p)):
        install, packaged = _install_of(program)
        if any(k.is_relative_to(install) for k in keep_out) or (
            not packaged and any(install.is_relative_to(p) for p in project)
        ):
            # A program in the project's own folder: that file alone (README: a program
            # that needs files beside it names them in [isolation] read_only).
            install = Path(os.path.realpath(program))
        found.append(install)
    read_only = _outermost([*seen, *found, *extras])
    shown = (*read_only, *map(Path, SYSTEM_DIRS))
    # What must stay unseen though a shown folder holds it: llmtt's code (unless llmtt is the
    # target), and the project, its results or HOME under a folder the user or PATH shows (a
    # project in /opt/...).
    own = () if set(_llmtt_folders()) <= set(more) else _llmtt_folders()
    unseen = [*own, *(k for k in keep_out if k != Path("/"))]
    hidden = tuple(p for p in unseen if any(p.is_relative_to(r) and p != r for r in shown))
    aliases = tuple(a for p in more if (a := _alias(p)) is not None)
    return Sandbox(bwrap, read_only, shared, hidden, aliases)


def _alias(program: Path) -> tuple[Path, Path] | None:
    """(install, where): a program found through a link to its install (a project's
    node_modules linked to another's) is started by the path it was found at, so its install
    is shown there too."""
    for folder in [program.parent, *program.parent.parents][:INSTALL_DEPTH]:
        if folder.name == "node_modules" or (folder / "pyvenv.cfg").is_file():
            real = Path(os.path.realpath(folder))
            return (real, folder) if real != folder else None
    return None


def target_program(binary: str | None) -> list[Path]:
    """The target's program where a run finds it (its install is shown to the sandbox); for
    the `llmtt` command of this llmtt, its code too (a suite testing llmtt itself)."""
    if not binary:
        return []
    found = binary if "/" in binary else shutil.which(binary, path=tool_path())
    if not found or not os.path.exists(found):
        return []
    own = Path(sys.prefix) / "bin" / "llmtt"
    if own.exists() and os.path.realpath(found) == os.path.realpath(own):
        return [Path(found), *_llmtt_folders()]
    return [Path(found)]


def _user_path(root: Path, given: str) -> Path:
    path = Path(given).expanduser()
    path = path if path.is_absolute() else root / path
    if not path.exists():
        raise IsolationError(
            f"[isolation] names {given!r}, which does not exist ({path}); fix or remove it"
        )
    return path.resolve()


@functools.cache
def _tool_folders(
    path: str, keep_out: tuple[Path, ...], project: tuple[Path, ...]
) -> tuple[Path, ...]:
    """The folders of the programs a run may start: PATH's (whole virtualenvs), and this
    Python's own installation; none that holds one of `keep_out`, and of the `project`'s own
    folders only its installs (a virtualenv, node_modules), not a folder of its scripts."""
    folders = [_install_of(Path(sys.prefix)), _install_of(Path(sys.base_prefix))]
    for entry in path.split(os.pathsep):
        if not entry or not os.path.isabs(entry) or not os.path.isdir(entry):
            continue
        folders.append(_install_of(Path(entry)))
    out = []
    for folder, packaged in folders:
        if _under_system(folder) or any(k.is_relative_to(folder) for k in keep_out):
            continue
        if not packaged and any(folder.is_relative_to(p) for p in project):
            continue
        out.append(folder)
    return tuple(dict.fromkeys(out))


def _install_of(path: Path) -> tuple[Path, bool]:
    """The folder a program's installation lives in, and whether it is a package's: its
    virtualenv or node_modules (looked for a few folders up), else the folder of the program
    (links followed)."""
    real = Path(os.path.realpath(path))
    for folder in [real, *real.parents][:INSTALL_DEPTH]:
        if folder.name == "node_modules" or (folder / "pyvenv.cfg").is_file():
            return folder, True
    return (real if real.is_dir() else real.parent), False


def _under_system(path: Path) -> bool:
    real = Path(os.path.realpath(path))
    return any(real.is_relative_to(d) for d in SYSTEM_DIRS if not os.path.islink(d))


def _outermost(paths: Sequence[Path]) -> tuple[Path, ...]:
    """Each path once, leaving out those inside another."""
    unique = sorted(set(paths), key=lambda p: len(p.parts))
    out: list[Path] = []
    for path in unique:
        if not any(path.is_relative_to(kept) for kept in out):
            out.append(path)
    return tuple(out)


def _llmtt_folders() -> tuple[Path, ...]:
    """llmtt's own code, hidden from every sandbox that would show it."""
    return (Path(llmtt.__file__).resolve().parent,)


def destinations(
    policy: NetworkPolicy, model: Sequence[tuple[str, int]] | None
) -> list[tuple[str, int]]:
    """The hosts a policy allows; `model`: the run's model endpoint (None: no model is called
    by the confined process, so `model` allows nothing)."""
    if policy == "none":
        return []
    names = [MODEL] if policy == MODEL else list(policy)
    out: list[tuple[str, int]] = []
    for name in names:
        if name == MODEL:
            out += model or []
        else:
            out.append(host_port(name))
    for host, _port in out:
        try:
            inside_address(host, {})
        except UnroutableHost as exc:
            raise IsolationError(f"network: {exc}") from None
    return out


def host_port(given: str, default: int = HTTPS) -> tuple[str, int]:
    """`host`, `host:port` or a URL: the host and port to relay."""
    parts = urlsplit(given if "//" in given else f"//{given}")
    host = parts.hostname
    if not host:
        raise IsolationError(f"network: {given!r} names no host")
    try:
        port = parts.port
    except ValueError:
        raise IsolationError(f"network: {given!r} has no valid port") from None
    if port is None:
        port = {"http": 80, "https": 443}.get(parts.scheme, default)
    return host, port


@contextlib.contextmanager
def confined(
    base: Sandbox | None,
    view: View,
    hosts: Sequence[tuple[str, int]] = (),
) -> Iterator[Confinement | None]:
    """The confinement of one process (or of an agent's whole run), with its network relayed
    while it lasts; None when unconfined."""
    if base is None:
        yield None
        return
    if not hosts:
        yield Confinement(base, view)
        return
    with Relay(hosts) as relay:
        yield Confinement(base, replace(view, routes=relay.routes))
