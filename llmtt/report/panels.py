"""The runs' panels of report.html, kept out of it in the files of a sibling folder.

report.html at 10,000 runs held every run's panel (its gates, metrics, timeline, transcript's
end, session recording) and weighed 11.6 MB: a browser took 4-5 s before it showed anything.
The panels are now written in `report-runs/` beside it, CHUNK_RUNS runs a file, each file a
script that hands its panels to the page (`llmttPanels(index, signature, {run id: html})`): a
page opened from file:// may not fetch() or XHR a local file, but it may add a `<script src>`,
so report.html reads a file when one of its runs is opened, and works offline and from any
copy that keeps the folder beside it.

Each file names its signature, a hash of what it holds and of the llmtt that wrote it, on its
first line; report.html names the signature it expects of each file, so a file of another
version of the report (a copy of an older report.html, an aggregate killed between the files and
the page) is told from the right one and said to be so, never shown as this report's. A file
whose signature is already the one wanted, and that ends as a whole file ends, is not written
again. The page asks for a file with its signature in the query (`0000.js?<signature>`): a
browser's cache of a report published over HTTP then never serves the file of an older version.

The panels are keyed by the run ids the page shows, which are redacted (a secret may share
characters with a scenario's or a variant's name), so no unmasked secret reaches a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from llmtt.spec.reserved import PANELS_FOLDER

PANELS_DIR = PANELS_FOLDER  # beside report.html; no scenario may take the name
# Runs a file: a page of report.html's list of runs; 0.5-2 MB of panels, as long as each run's
# timeline and recording are (a browser reads 1.5 MB of them in about 0.3 s on 2 cores).
CHUNK_RUNS = 100
FORMAT = 1  # of the files: part of every signature, so a new one rewrites them all
_CHUNK = re.compile(r"^\d{4,}\.js$")
# What a chunk's atomic write leaves when the process is killed between writing and renaming
# (llmtt.util.atomic names it so).
_TEMPORARY = re.compile(r"^\.\d{4,}\.js\..*\.tmp$")
_FIRST_LINE = re.compile(rb"^/\* llmtt report panels ([0-9a-f]+) \*/\n")
_LAST = b");\n"  # how every chunk file ends, and a file cut short does not


def chunk_count(runs: int) -> int:
    """How many files the panels of `runs` runs take."""
    return -(-runs // CHUNK_RUNS)


def chunk_name(index: int) -> str:
    """The file of chunk `index`, relative to report.html's folder (as the page loads it)."""
    return f"{PANELS_DIR}/{index:04d}.js"


def panel_targets(results_dir: Path, runs: int) -> list[Path]:
    """What the aggregate writes of the panels of `runs` runs: each chunk's file and their
    folder (listed after them, so `doit clean` removes the files, then the folder)."""
    return [results_dir / chunk_name(i) for i in range(chunk_count(runs))] + [
        results_dir / PANELS_DIR
    ]


def write_panels(
    results_dir: Path, panels: Sequence[tuple[str, str]], finish: Callable[[str], str]
) -> dict[str, Any]:
    """Write the panels (run id as the page shows it, redacted; html), in plan order, in their
    chunk files; return what the page reads them by: the runs a file holds, each file's name
    and signature. `finish` makes a panel's HTML fit to show (redacted, printable); it is
    applied only to the files written. A chunk file of no chunk (the plan lost runs) is removed,
    and so is the temporary file of a write that was killed."""
    from llmtt.report.cache import code_id

    folder = results_dir / PANELS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    # The code that finishes the panels, as well as the panels: a new llmtt whose redaction or
    # escaping differs writes every file again.
    seed = f"llmtt panels {FORMAT} {code_id()}"
    signatures: list[str] = []
    for index in range(chunk_count(len(panels))):
        part = panels[index * CHUNK_RUNS : (index + 1) * CHUNK_RUNS]
        signature = _signature(seed, part)
        signatures.append(signature)
        path = results_dir / chunk_name(index)
        if _signature_of(path) == signature:
            continue
        _write_chunk(path, index, signature, part, finish)
    wanted = {Path(chunk_name(i)).name for i in range(len(signatures))}
    for path in folder.iterdir():
        stray = _CHUNK.match(path.name) and path.name not in wanted
        if stray or _TEMPORARY.match(path.name):
            path.unlink(missing_ok=True)
    return {
        "chunk_runs": CHUNK_RUNS,
        "chunks": [[chunk_name(i), sig] for i, sig in enumerate(signatures)],
    }


def remove_panels(results_dir: Path) -> None:
    """Every chunk file of `results_dir`/report-runs/, written by whichever selection, the
    temporary files of killed writes, then the folder if that leaves it empty (`doit clean`:
    a narrower selection than the one that wrote them lists fewer files as its targets)."""
    folder = results_dir / PANELS_DIR
    if not folder.is_dir() or folder.is_symlink():
        return
    for path in folder.iterdir():
        if _CHUNK.match(path.name) or _TEMPORARY.match(path.name):
            path.unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:
        pass  # something of the user's own is in it: it stays, with the folder


def _signature(seed: str, part: Sequence[tuple[str, str]]) -> str:
    digest = hashlib.blake2b(seed.encode("utf-8", "replace"), digest_size=12)
    for run_id, html in part:
        digest.update(b"\0" + run_id.encode("utf-8", "replace") + b"\0")
        digest.update(html.encode("utf-8", "replace"))
    return digest.hexdigest()


def _signature_of(path: Path) -> str | None:
    """The signature on a chunk file's first line; None without a file, without such a line,
    or when the file does not end as a whole one does (a copy cut short keeps its first line)."""
    try:
        with open(path, "rb") as handle:
            found = _FIRST_LINE.match(handle.read(80))
            if found is None or handle.seek(0, os.SEEK_END) < found.end() + len(_LAST):
                return None
            handle.seek(-len(_LAST), os.SEEK_END)
            if handle.read() != _LAST:
                return None
    except OSError:
        return None
    return found[1].decode()


def _write_chunk(
    path: Path,
    index: int,
    signature: str,
    part: Sequence[tuple[str, str]],
    finish: Callable[[str], str],
) -> None:
    """One chunk file, written atomically: a page never reads half of one."""
    from llmtt.util.atomic import write_text

    # ASCII only (every other character escaped): the script reads the same whatever
    # encoding a browser or a web server assumes for it.
    panels = json.dumps({run_id: finish(html) for run_id, html in part}, separators=(",", ":"))
    text = (
        f"/* llmtt report panels {signature} */\n"
        f"llmttPanels({index}, {json.dumps(signature)}, {panels});\n"
    )
    write_text(path, text)
