"""Content hashes (xxhash) of values, files and folder trees: the keys of the task graph."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

import xxhash

from llmtt.util import signatures as inputs

Key = dict[str, str]  # a layer's cache key: what it depends on, part by part, as hashes
CHUNK = 1 << 20  # files are hashed a MiB at a time, never read whole: fixtures may be large


def hash_value(value: Any) -> str:
    """Hash a JSON-able value; key order does not matter."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return xxhash.xxh3_128_hexdigest(text.encode())


def hash_bytes(data: bytes) -> str:
    """Hash raw bytes."""
    return xxhash.xxh3_128_hexdigest(data)


def hash_file(path: Path) -> str:
    """Hash a file's contents; a missing file hashes as the word 'missing'."""
    inputs.note_file(path)
    digest = xxhash.xxh3_128()
    try:
        with open(path, "rb") as handle:
            _feed(digest, handle)
    except FileNotFoundError:
        return "missing"
    return digest.hexdigest()


def _feed(digest: xxhash.xxh3_128, handle: BinaryIO) -> None:
    while chunk := handle.read(CHUNK):
        digest.update(chunk)


def hash_tree(root: Path) -> str:
    """Hash a folder: every entry's relative path, kind, executable bit and contents."""
    digest = xxhash.xxh3_128()
    inputs.note_file(root)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        inputs.note_file(dirpath, follow=False)
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(
            filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        ):
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            info = os.lstat(full)
            inputs.note_file(full, follow=False)
            if stat.S_ISLNK(info.st_mode):
                digest.update(f"L {rel} -> {os.readlink(full)}\n".encode())
                continue
            executable = "x" if info.st_mode & stat.S_IXUSR else "-"
            digest.update(f"F {rel} {executable} {info.st_size}\n".encode())
            with open(full, "rb") as handle:
                _feed(digest, handle)
        for name in dirnames:
            if not os.path.islink(os.path.join(dirpath, name)):
                rel = os.path.normpath(os.path.join(rel_dir, name))
                digest.update(f"D {rel}\n".encode())
    return digest.hexdigest()
