"""The project files a module is made of: its own, and those of the project modules it imports
at any depth (packages, relative imports), read from the source and never run."""

from __future__ import annotations

from conftest import Project

from llmtt.plan.sources import project_sources


def sources(project: Project, module: str) -> list[str]:
    return [p.relative_to(project.root).as_posix() for p in project_sources(project.root, module)]


def test_imports_are_followed_through_packages_and_relative_imports(project: Project) -> None:
    project.write(
        "checks.py",
        """\
        import json
        import yaml
        import kit.scoring as scoring
        from kit import words, NAME
        from space import plain

        def later():
            from kit.deep import inner
        """,
    )
    project.write("kit/__init__.py", "NAME = 'x'\n")
    project.write("kit/scoring.py", "from . import words\nfrom .deep.inner import f\n")
    project.write("kit/words.py", "from .. import checks\nWORDS = []\n")  # beyond the top
    project.write("kit/deep/__init__.py", "from .inner import *\n")
    project.write("kit/deep/inner.py", "from ..words import WORDS\nimport kit.scoring\n")  # a cycle
    project.write("space/plain.py", "X = 1\n")  # a namespace package: no __init__.py
    project.write("unrelated.py", "import checks\n")
    project.write("json.py", "# the standard library's comes first on Python's path\n")
    assert sources(project, "checks") == [
        "checks.py",
        "kit/__init__.py",
        "kit/deep/__init__.py",
        "kit/deep/inner.py",
        "kit/scoring.py",
        "kit/words.py",
        "space/plain.py",
    ]
    assert sources(project, "kit.deep.inner") == [
        "kit/__init__.py",
        "kit/deep/__init__.py",
        "kit/deep/inner.py",
        "kit/scoring.py",
        "kit/words.py",
    ]


def test_a_package_comes_before_a_module_of_its_name(project: Project) -> None:
    project.write("evals.py", "import helper\n")
    project.write("evals/__init__.py", "")
    assert sources(project, "evals") == ["evals/__init__.py"]


def test_a_module_outside_the_project_has_no_sources(project: Project) -> None:
    project.write("checks.py", "X = 1\n")
    assert sources(project, "llmtt.plan.sources") == []
    assert sources(project, "missing") == []
    assert sources(project, "os.path") == []


def test_a_file_that_does_not_parse_is_still_a_source(project: Project) -> None:
    project.write("checks.py", "import helper\n")
    project.write("helper.py", "def broken(:\n    import never\n")
    project.write("never.py", "")
    assert sources(project, "checks") == ["checks.py", "helper.py"]
