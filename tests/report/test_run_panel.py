"""A run's panel in report.html shows what each failed tool call said: the head of its output,
escaped and redacted, the calls of the target (the tool under test) marked and listed first."""

from __future__ import annotations

import re

import pytest
from conftest import Project

from llmtt.redaction import MASK
from llmtt.report.calls import output_head

TOKEN = "tq8Zr2Lw5Xk9Pv3Nb7Jd4Hs6"  # no key shape: masked because the target's env holds it
KEY = "sk-proj-Ab3dE6gH9jK2mN5pQ8rS1tU4"  # masked for its shape alone
LATE = "Wm4Qx8Rt2Yp6Ls9Kd3Fv7Hb1"  # a secret known only when the report is made again

TOOLY = """\
#!/bin/sh
case "$1" in
  ok) echo fine; exit 0 ;;
  --long) printf '%%01495d' 0; echo %s >&2; exit 2 ;;
esac
echo "tooly: error: unknown flag '$1' <use --frob-less>" >&2
echo "tooly: token $TOOLY_TOKEN, key $2" >&2
for i in $(seq 1 30); do echo "detail line $i"; done
exit 2
"""

TOML = """\
[target]
binary = "tooly"
env.TOOLY_TOKEN = "%s"
"""

SCENARIO = """\
task: {prompt: Use tooly.}
fixture: fixtures/f
solution:
  - ls no-such-file-here
  - ./tooly --frob %s
  - ./tooly ok
  - ./tooly --long
"""


def test_a_failed_target_commands_output_is_shown_first_escaped_and_redacted(
    project: Project,
) -> None:
    project.write("llmtt.toml", TOML % TOKEN)
    project.write("scenarios/fixtures/f/tooly", TOOLY % LATE).chmod(0o755)
    project.write("scenarios/s.yaml", SCENARIO % KEY)
    ran = project.doit("run")
    assert ran.code == 0, ran.out + ran.err
    html = project.report_html()
    [panel] = re.findall(r'<ul class="failed-calls">.*?</ul>', html, re.S)
    calls = re.findall(r"<li>(.*?)</li>", panel, re.S)
    assert len(calls) == 3, panel
    frob, long, ls = calls
    assert "target" in frob and "target" in long and "target" not in ls
    assert "$ ./tooly --frob" in frob and "exit 2" in frob
    assert "tooly: error: unknown flag &#39;--frob&#39; &lt;use --frob-less&gt;" in frob
    assert f"tooly: token {MASK}, key {MASK}" in frob
    assert "detail line 10\n" in frob and "detail line 11" not in frob  # 12 lines of 32
    assert "20 more lines" in frob
    assert "$ ls no-such-file-here" in ls and "No such file or directory" in ls
    assert "0" * 1400 in long and "1 more line" in long
    assert TOKEN[:4] not in html and KEY[:12] not in html

    # A secret cut by the 1,500 characters a call shows is masked before it is cut: its first
    # characters, too few to be told for a secret's, are not left in the report.
    assert LATE[:5] in long
    (project.results() / "report.html").unlink()
    again = project.doit("run", "aggregate", env={"TOOLY_LATE_SECRET": LATE})
    assert again.code == 0 and again.executed() == ["aggregate"], again.out + again.err
    html = project.report_html()
    assert LATE[:4] not in html and f"{'0' * 1400}" in html


@pytest.mark.parametrize(
    ("output", "head", "more"),
    [
        ("", "", 0),
        ("\r\n\r\n", "", 0),
        ("\x1b[31merror\x1b[0m: no\r\n", "error: no", 0),
        ("10%\r50%\r100%\n", "10%\n50%\n100%", 0),
        ("\n".join(f"l{i}" for i in range(1, 15)), "\n".join(f"l{i}" for i in range(1, 13)), 2),
        ("a" * 1498 + "\nb\n", "a" * 1498 + "\nb", 0),
        ("a" * 1499 + "\nbc", "a" * 1499, 1),
        ("a" * 1500 + "\nb", "a" * 1500, 1),  # cut at the line's end: the line is whole
        ("a" * 1501 + "\nb", "a" * 1500, 2),
    ],
)
def test_the_head_of_an_output_says_how_many_lines_it_leaves_out(
    output: str, head: str, more: int
) -> None:
    assert output_head(output) == (head, more)
