"""opencode's own files in a run's HOME, made once per project and opencode binary.

Each run gets a new, empty HOME (no state carried between runs). Started in one, opencode
spent part of its start on work a user's opencode does once: it created and migrated its
database (`~/.local/share/opencode/opencode.db`, 38 migrations), and it set about installing
its plugin package (`@opencode-ai/plugin`) into its config folder, loading npm's installer and
asking the registry (a dead port in llmtt's runs, so it always failed), on the main thread
while the session started. A template made once, under `.llmtt/opencode-home/<binary>/`, holds
the migrated database with no session in it, and a package.json and lock in the config folder
that name the package: what opencode checks (by name) before it installs, so it installs
nothing. The package itself is not there, as it never was in a run: nothing in a run's HOME
loads it. Each run gets a copy; nothing goes back, so a run sees nothing of another.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

from llmtt.process.shell import tool_path

DATABASE = Path(".local") / "share" / "opencode" / "opencode.db"
CONFIG = Path(".config") / "opencode"
PLUGIN = "@opencode-ai/plugin"
MAKE_TIMEOUT_SECS = 60  # `opencode db`: ~2 s of CPU; 8 s of wall seen on a busy machine


def seed_home(home: Path, exe: str, project_root: Path) -> bool:
    """Copy the template for `exe` into the run's `home` (the template is made first when
    this project has none for it); False, and `home` left as it was, when it cannot be made:
    opencode then does that work itself, as before."""
    try:
        template = _template(project_root.resolve(), *_identity(exe))
    except OSError:  # the binary went away: the run says so when it starts it
        return False
    if template is None:
        return False
    (home / DATABASE).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template / DATABASE, home / DATABASE)  # opencode writes it: a copy
    config = home / CONFIG
    (config / "node_modules").mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(template / CONFIG / name, config / name)
    return True


def _identity(exe: str) -> tuple[str, int, int]:
    """The binary as found (its real path, size and time): another version is another file."""
    real = os.path.realpath(exe)
    stat = os.stat(real)
    return real, stat.st_size, stat.st_mtime_ns


@functools.lru_cache(maxsize=8)
def _template(project_root: Path, real: str, size: int, mtime_ns: int) -> Path | None:
    """The project's template for this binary, made when missing (once per process, also
    when it cannot be made)."""
    key = hashlib.sha256(f"{real}\0{size}\0{mtime_ns}".encode()).hexdigest()[:16]
    folders = project_root / ".llmtt" / "opencode-home"
    template = folders / key
    if (template / DATABASE).is_file():
        return template
    try:
        folders.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=folders))
    except OSError:
        return None
    try:
        _make(staging, real)
        try:
            # Whole or not at all: workers of one `doit run -n N` may make it at once.
            staging.rename(template)
        except OSError:
            if not (template / DATABASE).is_file():
                return None
        return template
    except (OSError, subprocess.SubprocessError, sqlite3.Error):
        return None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _make(home: Path, exe: str) -> None:
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
    done = subprocess.run(
        [exe, "db", "SELECT count(*) FROM session"],
        cwd=home,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=MAKE_TIMEOUT_SECS,
        check=True,
    )
    if done.stdout.split()[-1:] != [b"0"]:
        raise subprocess.SubprocessError("opencode's new database is not empty")
    database = home / DATABASE
    connection = sqlite3.connect(database)
    try:
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
