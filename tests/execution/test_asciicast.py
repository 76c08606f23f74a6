"""A run's session as an asciicast v2 recording: its header and timed events, lines cut only at
their ends, bare newlines made CR LF, secrets masked, bounded like the transcript, finished only
by its rename; and a real oracle run leaves one beside its transcript."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import GIT_TOML, Project

from llmtt.execution.asciicast import Recorder, read_cast, recorded
from llmtt.redaction import Redactor


def lines(path: Path) -> tuple[dict[str, object], list[list[object]]]:
    header, *events = (json.loads(line) for line in path.read_text().splitlines())
    return header, events


def test_recording_has_a_header_and_events_cut_at_line_ends(tmp_path: Path) -> None:
    cast = tmp_path / "session.cast"
    redactor = Redactor({"MY_TOKEN": "tok0123456789abcdefXYZ"})
    with Recorder(cast, redactor) as recorder:
        assert (tmp_path / "session.cast.part").exists() and not cast.exists()
        # a multi-byte character split between two reads, a secret split between two reads
        for chunk in (b"$ echo h\xc3", b"\xa9llo\nkey tok01234", b"56789abcdefXYZ\r\n", b"tail"):
            recorder.add(chunk)
    assert cast.exists() and not (tmp_path / "session.cast.part").exists()
    header, events = lines(cast)
    assert header["version"] == 2 and header["width"] == 220 and header["height"] == 50
    assert isinstance(header["timestamp"], int)
    texts = [e[2] for e in events]
    assert texts == ["$ echo héllo\r\n", "key [REDACTED]\r\n", "tail"]
    assert all(e[1] == "o" for e in events)
    times = [e[0] for e in events]
    assert times == sorted(times)


def test_an_unfinished_recording_keeps_its_part_name(tmp_path: Path) -> None:
    cast = tmp_path / "session.cast"
    try:
        with Recorder(cast) as recorder:
            recorder.add(b"started\n")
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert not cast.exists() and (tmp_path / "session.cast.part").exists()


def test_recording_is_bounded_and_says_what_was_cut(tmp_path: Path) -> None:
    cast = tmp_path / "session.cast"
    with Recorder(cast, limit=4000) as recorder:
        for n in range(1000):
            recorder.add(f"line {n:04d}\n".encode())
    assert cast.stat().st_size < 6000
    _, events = lines(cast)
    texts = "".join(str(e[2]) for e in events)
    assert texts.startswith("line 0000\r\n") and texts.endswith("line 0999\r\n")
    assert "characters of the session cut by llmtt ..." in texts
    # the report reads its end only, and says how much it left out
    read = read_cast(cast, 1000)
    assert read is not None and read["cut"] > 0
    assert read["events"][-1][1] == "line 0999\r\n"


def test_one_large_write_is_recorded_bounded_and_masked_whole(tmp_path: Path) -> None:
    """A 2 MB line in one write: cut into pieces, so the recording keeps its bound; a secret
    lying across where a piece would end is still masked; the report plays the end of a last
    line longer than the end it reads (as a recording made before pieces were bounded holds)."""
    from llmtt.execution.asciicast import LONGEST_PIECE

    secret = "tok0123456789abcdefXYZ"
    cast = tmp_path / "session.cast"
    big = "x" * (LONGEST_PIECE - 5) + secret + "y" * (2_000_000 - LONGEST_PIECE) + "END"
    with Recorder(cast, Redactor({"MY_TOKEN": secret}), limit=200_000) as recorder:
        recorder.add(big.encode())
    assert cast.stat().st_size < 200_000 * 1.1
    text = cast.read_text()
    assert "tok01" not in text and "[REDACTED]" in text
    _, events = lines(cast)
    assert max(len(str(e[2])) for e in events) <= LONGEST_PIECE
    assert str(events[-1][2]).endswith("yyyEND")
    read = read_cast(cast, 8192)
    assert read is not None and read["events"][-1][1].endswith("yyyEND")

    old = tmp_path / "old.cast"  # one line of 40 KB after the header
    old.write_text('{"version": 2}\n' + json.dumps([1.5, "o", "z" * 40_000 + "LAST"]) + "\n")
    read = read_cast(old, 8192)
    assert read is not None and read["events"] == [[1.5, "z" * 8188 + "LAST"]]


def test_transcript_and_recording_take_the_same_writes(tmp_path: Path) -> None:
    transcript = tmp_path / "t.txt"
    with Recorder(tmp_path / "s.cast") as recorder, open(transcript, "wb") as raw:
        with recorded(raw, recorder) as both:
            both.write(b"$ ls\n")
            both.flush()
            both.write(b"a\r\nb\r\n")
    assert transcript.read_bytes() == b"$ ls\na\r\nb\r\n"
    _, events = lines(tmp_path / "s.cast")
    assert "".join(str(e[2]) for e in events) == "$ ls\r\na\r\nb\r\n"


def test_an_oracle_run_leaves_its_session_recorded(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write(
        "scenarios/s.yaml",
        "task: {prompt: x}\nsolution: ['printf \"first\\nsecond\\n\"', git init -q .]\n",
    )
    assert project.doit("run").code == 0
    run = next(project.results().glob("s/*/r1"))
    assert (run / "transcript.raw.txt").exists()
    header, events = lines(run / "session.cast")
    assert header["version"] == 2
    text = "".join(str(e[2]) for e in events)
    assert '$ printf "first\\nsecond\\n"\r\nfirst\r\nsecond\r\n$ git init -q .\r\n' in text
    assert not list(run.glob("*.part"))
