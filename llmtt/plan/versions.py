"""Versions of targets (`version_command`) and agent CLIs (`--version`): part of every run key.

Probing once per invocation is the rule; results are also kept in a small cache keyed by the
resolved binary's path, size and modification time, so `doit list` does not pay for starting
slow tools (a Python CLI takes ~0.3 s, an agent CLI more) when nothing about the binary changed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from llmtt.errors import LlmttError
from llmtt.process.shell import run_shell, tool_path
from llmtt.spec.config import TargetSpec
from llmtt.spec.variables import expand_env, referenced
from llmtt.util import signatures as inputs
from llmtt.util.atomic import write_json
from llmtt.util.hashing import hash_value

VERSION_TIMEOUT_SECS = 20.0


class Versions:
    """Version strings, probed at most once per process and cached per binary."""

    def __init__(self, cache_file: Path, cwd: Path) -> None:
        self._file = cache_file
        self._cwd = cwd
        self._seen: dict[str, str] = {}
        self._dirty = False
        try:
            self._cache: dict[str, str] = json.loads(cache_file.read_text())
        except (OSError, ValueError):
            self._cache = {}

    def target(self, target: TargetSpec) -> str:
        """The output of the target's version command, or why it failed. It runs in the
        project folder, which its env's workspace and run folder references then name."""
        if not target.version_command:
            return "unversioned"
        here = str(self._cwd)
        for _, name in referenced(target.env):
            inputs.note_env(name)  # the plan cache is stale when it changes
        try:
            env = expand_env(target.env, workspace=here, run_dir=here)
        except LlmttError as exc:
            return f"error: cannot run: {exc}"
        return self.probe(target.version_command, target.binary, env)

    def probe(self, command: str, binary: str | None, env: Mapping[str, str]) -> str:
        """The output of `command` (run with `env`), or `error: ...` saying why it failed."""
        key = self._cache_key(command, binary, env)
        if key in self._seen:
            return self._seen[key]
        version = self._cache.get(key) if key.startswith("bin:") else None
        if version is None:
            version = self._run(command, env)
            if key.startswith("bin:") and not version.startswith("error:"):
                self._cache[key] = version
                self._dirty = True
        self._seen[key] = version
        if version.startswith("error:"):
            inputs.unsettle(version)  # probed again next time, maybe with another answer
        return version

    def save(self) -> None:
        """Write the cache if anything new was probed."""
        if self._dirty:
            write_json(self._file, self._cache)
            self._dirty = False

    def _cache_key(self, command: str, binary: str | None, env: Mapping[str, str]) -> str:
        resolved = inputs.which(binary, tool_path()) if binary else None
        if resolved is None:
            inputs.unsettle(f"`{command}` is run on every load: no binary to key its output on")
            return "cmd:" + hash_value([command, dict(env)])
        info = os.stat(resolved)
        return "bin:" + hash_value([command, dict(env), resolved, info.st_size, info.st_mtime_ns])

    def _run(self, command: str, env: Mapping[str, str]) -> str:
        full = {"PATH": tool_path(), "HOME": os.environ.get("HOME", "/"), "LC_ALL": "C.UTF-8"}
        full.update(env)
        result = run_shell(command, cwd=self._cwd, env=full, timeout_secs=VERSION_TIMEOUT_SECS)
        if not result.ok:
            detail = (result.stderr or result.stdout).strip().splitlines()[-1:] or [""]
            return f"error: `{command}` failed ({result.describe()}): {detail[0]}"
        return result.stdout.strip() or result.stderr.strip() or "empty"
