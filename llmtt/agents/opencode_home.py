"""opencode's own files in a run's HOME, made once per project and opencode binary.

Each run gets a new, empty HOME (no state carried between runs). Started in one, opencode
spent part of its start on work a user's opencode does once: it created and migrated its
database (`~/.local/share/opencode/opencode.db`, 38 migrations), and it set about installing
its plugin package (`@opencode-ai/plugin`) into its config folder, loading npm's installer and
asking the registry (a dead port in llmtt's runs, so it always failed), on the main thread
while the session started. A template made once, under `.llmtt/opencode-home/<key>/`, holds
the migrated database with no session in it, and a package.json and lock in the config folder
that name the package: what opencode checks (by name) before it installs, so it installs
nothing. The package itself is not there, as it never was in a run: nothing in a run's HOME
loads it. Each run gets a copy, laid before any process of the run starts; nothing goes back,
so a run sees nothing of another.

opencode makes the template in the run's sandbox (its staging folder the only one it sees,
and its HOME; no network), one process of a project at a time; a make that failed is not tried
again for an hour, by any process. Whatever goes wrong, the run starts from an empty HOME, as
it did before templates.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from llmtt.errors import no_space
from llmtt.process.sandbox.bwrap import Sandbox, View
from llmtt.process.shell import tool_path

# llmtt's layout of a template (which files, made how): part of its key, so a template made by
# an llmtt that laid it out otherwise is never taken for one of this layout.
FORMAT = 2
FOLDER = Path(".llmtt") / "opencode-home"
DATABASE = Path(".local") / "share" / "opencode" / "opencode.db"
CONFIG = Path(".config") / "opencode"
FILES = (DATABASE, CONFIG / "package.json", CONFIG / "package-lock.json")
PLUGIN = "@opencode-ai/plugin"
MAKE_TIMEOUT_SECS = 60  # `opencode db`: ~2 s of CPU; 8 s of wall seen on a busy machine
RETRY_SECS = 3600  # a make that failed is tried again after this long (or for another key)
LOCK = ".lock"
FAILED = ".failed"  # `<key>.failed`: why the make for that key failed, and when


def seed_home(home: Path, exe: str, project_root: Path, sandbox: Sandbox | None) -> bool:
    """Lay the template for `exe` into the run's new `home` (made first when this project has
    none; in `sandbox`, None when runs are unconfined): False when there is none to lay, and
    opencode then does that work itself. A file already in `home`, or a link on the way to
    it, is left as it is. A full disk is raised as NoSpace."""
    try:
        template = _template(project_root.resolve(), template_key(exe), exe, sandbox)
    except OSError:  # the binary went away: the run says so when it starts it
        return False
    if template is None:
        return False
    try:
        _place(home, CONFIG / "node_modules", None)
        for name in FILES:
            _place(home, name, template / name)  # opencode writes the database: a copy
    except OSError as exc:
        full = no_space(exc, home)
        if full is not None:
            raise full from None
        return False  # a template removed meanwhile (`llmtt clean`, rm -rf .llmtt)
    return True


def template_key(exe: str) -> str:
    """The template's name for the binary as found (its real path, size and time: another
    version is another file) in llmtt's layout of the day (OSError: no such binary)."""
    real = os.path.realpath(exe)
    stat = os.stat(real)
    identity = f"{FORMAT}\0{real}\0{stat.st_size}\0{stat.st_mtime_ns}"
    return hashlib.sha256(identity.encode()).hexdigest()[:16]


def _place(home: Path, rel: Path, source: Path | None) -> None:
    """Copy `source` to `home/rel` (None: make that folder), never through a link and never
    over a file that is there; a copy cut short is removed."""
    parts = rel.parts if source is None else rel.parent.parts
    with _folder(home, parts) as folder:
        if folder is None or source is None:
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            out = os.open(rel.name, flags, 0o644, dir_fd=folder)
        except FileExistsError:
            return  # the HOME's own file, or a link: left as it is
        try:
            with os.fdopen(out, "wb") as target, open(source, "rb") as given:
                shutil.copyfileobj(given, target)
        except BaseException:
            os.unlink(rel.name, dir_fd=folder)
            raise


@contextlib.contextmanager
def _folder(home: Path, parts: tuple[str, ...]) -> Iterator[int | None]:
    """The folder `home/parts...` open (made where missing), or None where a part of the way
    is a link or no folder: each part is opened in the one before, never by its path."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(home, flags)
    try:
        for part in parts:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            try:
                inner = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    yield None
                    return
                raise
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def _template(root: Path, key: str, exe: str, sandbox: Sandbox | None) -> Path | None:
    """The project's template under `key`, made when missing by one process at a time (the
    others wait for it and take it); None when it cannot be made, or failed within the hour."""
    folders = root / FOLDER
    template = folders / key
    if _whole(template):
        return template
    try:
        folders.mkdir(parents=True, exist_ok=True)
        with _locked(folders, wait=True):
            if _whole(template):
                return template  # made by the process this one waited for
            failed = folders / f"{key}{FAILED}"
            with contextlib.suppress(FileNotFoundError):
                if time.time() - failed.stat().st_mtime < RETRY_SECS:
                    return None
            why = _made(folders, template, exe, sandbox)
            if why is not None:
                failed.write_text(why + "\n")
                return None
            failed.unlink(missing_ok=True)
            return template
    except OSError:
        return None


def _whole(template: Path) -> bool:
    return all((template / name).is_file() for name in FILES)


@contextlib.contextmanager
def _locked(folders: Path, *, wait: bool) -> Iterator[bool]:
    """The lock of the project's templates: True when held (`wait`: until it is)."""
    fd = os.open(folders / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _made(folders: Path, template: Path, exe: str, sandbox: Sandbox | None) -> str | None:
    """Make the template (whole or not at all: in a staging folder, renamed); why not, or None."""
    staging = Path(tempfile.mkdtemp(prefix=f".{template.name}-", dir=folders))
    try:
        _make(staging, exe, sandbox)
        shutil.rmtree(template, ignore_errors=True)  # one not whole (a file of it removed)
        staging.rename(template)
        return None
    except subprocess.CalledProcessError as exc:
        said = (exc.stderr or b"").decode(errors="replace").strip().splitlines()
        return f"`opencode db` exited {exc.returncode}" + (f": {said[-1]}" if said else "")
    except (OSError, subprocess.SubprocessError, sqlite3.Error) as exc:
        return str(exc) or type(exc).__name__
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _make(home: Path, exe: str, sandbox: Sandbox | None) -> None:
    """opencode's database, made and migrated by opencode itself (`opencode db`, which
    starts no session), and the config folder's package files, in `home`."""
    xdg = {
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_DATA_HOME": home / ".local" / "share",
        "XDG_STATE_HOME": home / ".local" / "state",
        "XDG_CACHE_HOME": home / ".cache",
    }
    for folder in xdg.values():
        folder.mkdir(parents=True, exist_ok=True)
    env = {
        **{name: str(folder) for name, folder in xdg.items()},
        "HOME": str(home),
        "PATH": tool_path(),
        "LANG": "C.UTF-8",
        "PWD": str(home),
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "npm_config_registry": "http://127.0.0.1:9/",
    }
    argv = [exe, "db", "SELECT count(*) FROM session"]
    if sandbox is not None:
        # As the run's agent is confined, less: its HOME (the staging folder) the only folder
        # it sees of its own, and no network at all.
        argv = sandbox.argv(View(cwd=home, writable=(home,)), argv)
    done = subprocess.run(
        argv,
        cwd=home,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=MAKE_TIMEOUT_SECS,
        check=True,
    )
    if done.stdout.split()[-1:] != [b"0"]:
        raise subprocess.SubprocessError("opencode's new database is not empty")
    # Read-write but never made: an opencode that names its database otherwise (by release
    # channel) leaves none here, and an empty one made by this look would be copied to runs.
    uri = f"{(home / DATABASE).as_uri()}?mode=rw"
    connection = sqlite3.connect(uri, uri=True)
    try:
        (migrated,) = connection.execute("SELECT count(*) FROM migration").fetchone()
        if not migrated:
            raise sqlite3.DatabaseError("opencode's new database has no migration in it")
        # Everything into the database file: the copy is that one file.
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
    config = home / CONFIG
    (config / "node_modules").mkdir(parents=True, exist_ok=True)
    # What opencode checks before installing its plugin package: the names in both files
    # (versions are not compared).
    (config / "package.json").write_text(json.dumps({"dependencies": {PLUGIN: "*"}}))
    lock = {"lockfileVersion": 3, "packages": {"": {"dependencies": {PLUGIN: "*"}}}}
    (config / "package-lock.json").write_text(json.dumps(lock))


def leftovers(project_root: Path, exe: str | None) -> list[tuple[Path, str]]:
    """What `llmtt clean` removes of the project's templates, and why: those of another binary
    (or layout) than `exe`'s, their failure records, and staging folders of makes that were
    killed (none while a make is going on)."""
    folders = project_root / FOLDER
    if not folders.is_dir():
        return []
    try:
        key = template_key(exe) if exe else None
    except OSError:
        key = None
    out: list[tuple[Path, str]] = []
    with _locked(folders, wait=False) as held:
        for path in sorted(folders.iterdir()):
            name = path.name
            if name == LOCK or path.is_symlink():
                continue
            if name.startswith("."):
                if held:
                    out.append((path, "left by a template's make that was stopped"))
            elif name.removesuffix(FAILED) != key:
                out.append((path, "opencode's template for another opencode binary"))
    return out
