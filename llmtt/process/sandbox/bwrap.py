"""The bubblewrap command line that confines one process.

A confined process runs in its own user, mount, PID, IPC, UTS, cgroup and network namespaces
with no capabilities. Its file system is built from nothing: the system's programs and
libraries, the folders the tools it runs live in, read-only; its own folders (a workspace, a
HOME, a /tmp) read-write at the paths they have outside, so paths in transcripts and reports
mean the same thing inside and out. Everything else of the machine (the user's HOME, the
project, the results, other runs, other processes) is simply not there.

The network namespace has only a loopback interface. The hosts a process may reach are relayed
(`llmtt.process.sandbox.relay`): inside, a small relay listens on a loopback address that
/etc/hosts gives the host's name, and passes each connection over a Unix socket to the harness,
which connects to the real host. With no routes the process reaches nothing.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from llmtt.process.sandbox.relay import HOSTS, INSIDE_DIR, LAUNCHER, Route
from llmtt.spec.scenario import SYSTEM_DIRS

BWRAP_ENV = "LLMTT_BWRAP"  # another bubblewrap binary than the one on PATH
UNCONFINED_HINT = (
    'run unconfined on purpose with [isolation] mode = "none" in llmtt.toml (or '
    "LLMTT_ISOLATION=none)"
)
INSTALL_HINT = (
    "install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), "
    f"or {UNCONFINED_HINT}"
)

PRIVILEGED_PORTS = 1024

# What of /etc a process has no business reading (on a machine where it runs as root it could).
HIDDEN_ETC = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/security/opasswd",
    "/etc/ssl/private",
    "/etc/apt/auth.conf",
    "/etc/apt/auth.conf.d",
    "/etc/NetworkManager/system-connections",
    "/etc/wpa_supplicant",
    "/etc/credstore",
    "/etc/credstore.encrypted",
)


@dataclass(frozen=True)
class View:
    """What one confined process sees besides the system's programs: its own folders."""

    cwd: Path
    writable: tuple[Path, ...] = ()  # read-write, at their own paths
    readable: tuple[Path, ...] = ()  # read-only, at their own paths (files or folders)
    tmp: Path | None = None  # the folder that is its /tmp (None: an empty one in memory)
    # Read-write at another path: (inside, folder), the folder's real path with no link in it,
    # or None where the folder could not be shown safely (then an empty one is). A folder seen
    # at /tmp is given as `tmp` instead.
    mounts: tuple[tuple[str, Path | None], ...] = ()
    routes: tuple[Route, ...] = ()  # the hosts it may reach (see relay.Relay)
    tmp_checked: bool = False  # `tmp` is a folder of the workspace: checked like a mount


def mounted(view: View, workspace: Path, mounts: Mapping[str, str]) -> View:
    """`view` with the folders of `workspace` that `mounts` names seen at their paths (made
    when missing). A mount of the workspace itself makes its path the working folder; one at
    /tmp becomes the /tmp. A folder reached through a link (one a run planted, or a fixture's)
    is not followed: an empty folder is seen there instead, at every start (see `_safe`)."""
    seen: list[tuple[str, Path | None]] = []
    cwd, tmp, checked = view.cwd, view.tmp, view.tmp_checked
    root = Path(os.path.realpath(workspace))
    for inside, folder in mounts.items():
        path = _folder_in(root, folder)
        if inside == "/tmp":
            tmp, checked = path, True
            continue
        seen.append((inside, path))
        if path == root:
            cwd = Path(inside)
    return replace(view, cwd=cwd, tmp=tmp, mounts=tuple(seen), tmp_checked=checked)


def _folder_in(root: Path, rel: str) -> Path | None:
    """`root/rel`, made where missing, or None where a part of it is a link or not a folder."""
    path = root
    for part in PurePosixPath(rel).parts:
        if part in ("", "."):
            continue
        path = path / part
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            return None
        path.mkdir(exist_ok=True)
    return path


def _safe(folder: Path | None) -> Path | None:
    """`folder` when it still is that folder (no part of its path became a link), else None."""
    if folder is None or os.path.realpath(folder) != str(folder) or not folder.is_dir():
        return None
    return folder


@dataclass(frozen=True)
class Sandbox:
    """bubblewrap and what every confined process of a project sees read-only: the system, the
    folders of the tools on PATH and of the interpreters, the agent CLIs, the user's extras."""

    bwrap: str
    read_only: tuple[Path, ...] = ()
    read_write: tuple[Path, ...] = ()  # the user's extras, seen read-write by every process
    hidden: tuple[Path, ...] = ()  # folders inside read_only that stay empty (llmtt's code)
    aliases: tuple[tuple[Path, Path], ...] = ()  # (folder, another path it is shown at)

    def argv(self, view: View, argv: Sequence[str]) -> list[str]:
        """The command line that runs `argv` confined to `view`."""
        out = [self.bwrap, *_namespaces(view.routes), "--die-with-parent"]
        out += _system()
        # /tmp first: what is shown below it (a project in /tmp) is mounted inside it.
        out += ["--proc", "/proc", "--dev", "/dev"]
        tmp = _safe(view.tmp) if view.tmp_checked else view.tmp
        out += ["--bind", str(tmp), "/tmp"] if tmp is not None else ["--tmpfs", "/tmp"]
        # The tools' folders, then what must stay unseen inside them (llmtt's code, a project
        # or HOME under a shown folder), then the tools' folders inside those.
        inner = [p for p in self.read_only if any(p.is_relative_to(h) for h in self.hidden)]
        out += _binds("--ro-bind", [p for p in self.read_only if p not in inner])
        for folder in self.hidden:
            if folder.is_dir():
                out += ["--tmpfs", str(folder)]
        out += _binds("--ro-bind", inner)
        for folder, where in self.aliases:
            out += ["--ro-bind", str(folder), str(where)]
        # Later binds go over earlier ones: a writable folder inside a readable one stays so.
        out += _binds("--ro-bind", view.readable)
        out += _binds("--bind", self.read_write)
        out += _binds("--bind", view.writable)
        for inside, shown in view.mounts:
            source = _safe(shown)
            out += ["--bind", str(source), inside] if source else ["--tmpfs", inside]
        if view.routes:
            out += self._network(view.routes)
        out += ["--chdir", str(view.cwd), "--setenv", "PWD", str(view.cwd)]
        if view.tmp is not None:
            out += ["--setenv", "TMPDIR", "/tmp"]
        out.append("--")
        if view.routes:
            # The relay listens before the command starts, so its first connection finds it.
            relay = f"{INSIDE_DIR}/relay.py"
            out += [_python(), "-I", "-S", relay, _route_table(view.routes)]
            if _as_root(view.routes) and os.getuid() != 0:
                out.append(f"{os.getuid()}:{os.getgid()}")  # the command's own ids back
            out.append("--")
        return out + list(argv)

    def covered(self, view: View) -> str | None:
        """What a mount of `view` would hide that the sandbox must show (its own folders, the
        tools), said as an error; None when nothing."""
        needed = [
            *view.writable,
            *view.readable,
            *self.read_only,
            *(where for _, where in self.aliases),
            Path(_python()),
        ]
        for inside, _ in view.mounts:
            for path in needed:
                if path.is_relative_to(inside):
                    return (
                        f"mounts: {inside} would hide {path}, which the sandbox shows; name a "
                        "deeper folder of the task"
                    )
        return None

    def _network(self, routes: Sequence[Route]) -> list[str]:
        """The relay's folder (its sockets) at INSIDE_DIR, and its /etc/hosts."""
        out = ["--ro-bind", LAUNCHER, f"{INSIDE_DIR}/relay.py"]
        for folder in sorted({route.socket.parent for route in routes}):
            out += ["--ro-bind", str(folder), f"{INSIDE_DIR}/{folder.name}"]
            out += ["--ro-bind", str(folder / HOSTS), "/etc/hosts"]
        return out


@dataclass(frozen=True)
class Confinement:
    """One process's sandbox: `wrap` turns its command line into the confined one."""

    sandbox: Sandbox
    view: View

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """The command line that runs `argv` in this sandbox."""
        return self.sandbox.argv(self.view, argv)


def _as_root(routes: Sequence[Route]) -> bool:
    """Whether the relay must be uid 0 inside to listen on a port below 1024."""
    return any(route.port < PRIVILEGED_PORTS for route in routes)


def _namespaces(routes: Sequence[Route]) -> list[str]:
    out = ["--unshare-all", "--unshare-user"]
    if os.geteuid() == 0:
        # bubblewrap started by root keeps root's capabilities unless told otherwise.
        out += ["--cap-drop", "ALL"]
    if _as_root(routes):
        # The relay listens on the host's own port (443 for https). Binding one below 1024
        # takes CAP_NET_BIND_SERVICE in the user namespace that owns the network namespace,
        # which is bubblewrap's outer one unless the process is uid 0 inside (with another
        # uid, bubblewrap nests a second namespace to mount /dev). The capability reaches no
        # further than the sandbox's own network, and the command itself runs as the user.
        out += ["--uid", "0", "--gid", "0", "--cap-add", "CAP_NET_BIND_SERVICE"]
        if os.getuid() != 0:
            # To map the user's own ids in the command's namespace (inside.py: _become).
            out += ["--cap-add", "CAP_SETFCAP"]
    return out


@functools.cache
def _system() -> tuple[str, ...]:
    out: list[str] = []
    # Read-only where they exist; links (/bin -> usr/bin on a merged /usr) are made as links.
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            out += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            out += ["--ro-bind", path, path]
    for path in HIDDEN_ETC:
        if os.path.isdir(path) and not os.path.islink(path):
            out += ["--tmpfs", path]
        elif os.path.lexists(path):
            out += ["--ro-bind", "/dev/null", path]
    return tuple(out)


def _binds(option: str, paths: Iterable[Path]) -> list[str]:
    out: list[str] = []
    for path in paths:
        out += [option, str(path), str(path)]
    return out


def _route_table(routes: Sequence[Route]) -> str:
    return ";".join(
        f"{r.address},{r.port},{INSIDE_DIR}/{r.socket.parent.name}/{r.socket.name}" for r in routes
    )


def _python() -> str:
    """The interpreter the relay runs on inside: this one's, past any virtualenv."""
    return os.path.realpath(sys.executable)


def find_bwrap() -> str | None:
    """The bubblewrap binary: LLMTT_BWRAP, else `bwrap` on PATH."""
    given = os.environ.get(BWRAP_ENV)
    if given:
        return given if os.path.isfile(given) and os.access(given, os.X_OK) else None
    return shutil.which("bwrap")


@functools.cache
def unavailable(bwrap: str | None) -> str | None:
    """Why no process can be confined here (one line, with what to do), or None: bubblewrap
    is asked to make an empty sandbox once per process."""
    if bwrap is None:
        given = os.environ.get(BWRAP_ENV)
        if given:
            return f"{BWRAP_ENV}={given} is not an executable file"
        return f"runs are confined with bubblewrap, which is not installed: {INSTALL_HINT}"
    probe = Sandbox(bwrap).argv(View(cwd=Path("/")), ["true"])
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap ({bwrap}) cannot be run: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        why = said[-1] if said else f"exit {done.returncode}"
        return (
            f"bubblewrap ({bwrap}) cannot make a sandbox here ({why}): allow user namespaces "
            "(sysctl kernel.unprivileged_userns_clone=1, or an AppArmor profile for bwrap), "
            f"or {UNCONFINED_HINT}"
        )
    return None
