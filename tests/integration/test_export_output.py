"""``sparktui export -o``: it never writes over the recording it reads (itself, a symlink, a hard link,
its journal), writes its output under a temporary name renamed at the end (a failure leaves what was
there, never half a file), and every output it cannot write is one line and exit 2, never a traceback;
`| head` ends it quietly. The real command line in a subprocess, on a recording the real recorder
wrote."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.record import export
from tests.integration.test_record_hostile import ROOT, copy_of, one_line, record, sparktui


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(tmp_path_factory.mktemp("good") / "fleet.db")


@pytest.fixture
def recording(good: Path, tmp_path: Path) -> Path:
    return copy_of(good, tmp_path)


@pytest.mark.parametrize("output", ["itself", "symlink", "hard link", "its journal"])
def test_export_never_writes_over_the_recording_it_reads(recording: Path, tmp_path: Path, output: str) -> None:
    before = digest(recording)
    if output == "itself":
        target = recording
    elif output == "symlink":
        target = tmp_path / "out.csv"
        target.symlink_to(recording)
    elif output == "hard link":
        target = tmp_path / "out.csv"
        target.hardlink_to(recording)
    else:
        target = recording.with_name(recording.name + "-wal")
        target.write_bytes(b"")
    ran = sparktui("export", recording, "--to", "csv", "-o", target, tmp=tmp_path)
    assert ran.returncode == 2
    assert "give another output file" in one_line(ran.stderr)
    assert digest(recording) == before
    assert not list(tmp_path.glob(".*.part"))


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("/dev/full", "No space left on device"),
        ("folder", "it is a folder"),
        ("missing/out.csv", "No such file or directory"),
        ("file/out.csv", "Not a directory"),
    ],
)
def test_an_output_that_cannot_be_written_is_one_line(
    recording: Path, tmp_path: Path, output: str, reason: str
) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("a file, not a folder\n")
    target = output if output.startswith("/") else str(tmp_path / output)
    ran = sparktui("export", recording, "--to", "jsonl", "-o", target, tmp=tmp_path)
    assert ran.returncode == 2
    line = one_line(ran.stderr)
    assert line.startswith(f"sparktui export: cannot write {target}") and reason in line


def test_stdout_that_cannot_be_written_is_one_line_and_a_closed_pipe_is_quiet(recording: Path, tmp_path: Path) -> None:
    with Path("/dev/full").open("wb") as full:
        ran = subprocess.run(
            [sys.executable, "-m", "sparktui", "export", str(recording), "--to", "csv"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            check=False,
        )
    assert ran.returncode == 2
    assert "No space left on device" in one_line(ran.stderr)
    # `sparktui export ... | head -0`: the reader is gone before the first row.
    process = subprocess.Popen(
        [sys.executable, "-m", "sparktui", "export", str(recording), "--to", "csv"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141
    assert stderr == ""


def test_a_failed_export_leaves_the_output_as_it_was_and_no_half_file(recording: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    out.write_text("yesterday's export\n")
    link = tmp_path / "latest.csv"
    link.symlink_to(out)
    with pytest.raises(RuntimeError), export.output_file(link, recording) as stream:
        stream.write("time,t,node\n" * 1000)
        raise RuntimeError("the export failed half way")
    assert out.read_text() == "yesterday's export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleet.db", "latest.csv", "out.csv"]
    with export.output_file(link, recording) as stream:
        stream.write("today's export\n")
    assert link.is_symlink() and out.read_text() == "today's export\n"
    assert (out.stat().st_mode & 0o777) == 0o600
    with pytest.raises(export.OutputError, match="is the recording"), export.output_file(recording, recording):
        pass
