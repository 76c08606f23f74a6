"""The project's own Python files that a module is made of, found without running anything.

A project may name its own evaluator in llmtt.toml (`[evaluators] x = "my_evals:X"`). Editing
that module, or a project module it imports, changes how runs are scored, so their files are part
of the evaluate key. They are found by reading each module's import statements (`ast`) and
resolving the names against the project folder alone: installed packages and the standard library
are not the project's to key on. Imports are read wherever they stand (in a function, under
`if TYPE_CHECKING:`): counting one that never runs only costs an evaluation more. A module
imported by a computed name (`importlib.import_module(name)`) cannot be found this way.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def project_sources(root: Path, module: str) -> list[Path]:
    """The files of `module` (a dotted name) and of every project module it imports, at any
    depth, with the `__init__.py` of each package on the way; only those in the folder `root`
    (none when `module` is not there), sorted."""
    found: set[Path] = set()
    todo = _files(root, module)
    while todo:
        path = todo.pop()
        if path in found:
            continue
        found.add(path)
        package = path.relative_to(root).parent.parts
        for name in _imported(path, package):
            todo.extend(_files(root, name))
    return sorted(found)


def _imported(path: Path, package: tuple[str, ...]) -> list[str]:
    """The dotted names a module file imports: `from a import b` names both `a` and `a.b` (`b`
    may be a module); a relative import is resolved from the file's `package`. A file that does
    not parse imports nothing that can be known (its own content is still keyed)."""
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level > len(package):
                continue  # beyond the top package: Python refuses it too
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            if node.module:
                base.extend(node.module.split("."))
            if base:
                names.append(".".join(base))
            names.extend(".".join([*base, a.name]) for a in node.names if a.name != "*")
    return names


def _files(root: Path, name: str) -> list[Path]:
    """The files importing `name` runs when it is a module of the project folder `root`: each
    enclosing package's `__init__.py` (a folder without one is a namespace package) and the
    module's own file; none when it is not the project's (or is the standard library's, which
    comes first on Python's path)."""
    parts = name.split(".")
    if not all(p.isidentifier() for p in parts) or parts[0] in sys.stdlib_module_names:
        return []
    files: list[Path] = []
    folder = root
    for part in parts[:-1]:
        folder = folder / part
        if not folder.is_dir():
            return []
        if (folder / "__init__.py").is_file():
            files.append(folder / "__init__.py")
    # A package comes before a module of the same name, as Python's own finder has it.
    for candidate in (folder / parts[-1] / "__init__.py", folder / f"{parts[-1]}.py"):
        if candidate.is_file():
            return [*files, candidate]
    return []
