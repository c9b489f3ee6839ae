"""The progress line: only on a terminal (or when asked), redrawn in place, erased at the end."""

from __future__ import annotations

import io
import shutil

import pytest

from msccl_py import progress
from msccl_py.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_silent_on_a_pipe_and_when_turned_off(monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)
    pipe = io.StringIO()
    with Progress("work", total=2, stream=pipe) as p:
        p.update(1)
        p.update(2)
    assert pipe.getvalue() == ""
    monkeypatch.setenv(progress.ENV, "0")
    tty = Terminal()
    with Progress("work", total=2, stream=tty) as p:
        p.update(1)
    assert tty.getvalue() == ""


def test_terminal_sees_the_line_only_after_the_delay(monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)
    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    tty = Terminal()
    with Progress("timing", total=10, stream=tty) as p:
        p.update(1)                       # at once: short work shows nothing
        assert tty.getvalue() == ""
        clock[0] += 3
        p.update(7, "1 MiB")
        assert tty.getvalue() == "\rtiming: 7/10 1 MiB (3 s)"
    # erased when done: spaces over the line, back to its start
    assert tty.getvalue().endswith("\r" + " " * len("timing: 7/10 1 MiB (3 s)") + "\r")


def test_forced_on_any_stream_and_usable_as_a_callback(monkeypatch):
    monkeypatch.setenv(progress.ENV, "1")
    out = io.StringIO()
    with Progress("tune", stream=out) as p:
        p(3, 12, "simulating")
    assert "\rtune: 3/12 simulating (0 s)" in out.getvalue()


def test_ticker_redraws_work_that_reports_nothing(monkeypatch):
    monkeypatch.setenv(progress.ENV, "1")
    monkeypatch.setattr(progress, "INTERVAL", 0.01)
    out = io.StringIO()
    with Progress("building", stream=out, ticker=True):
        for _ in range(200):
            if "building: (0 s)" in out.getvalue():
                break
            progress.time.sleep(0.01)
    assert "\rbuilding: (0 s)" in out.getvalue()


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
def test_first_native_build_says_so_once(tmp_path, monkeypatch, capsys):
    from msccl_py.transport import cxx_build
    monkeypatch.setenv(progress.ENV, "1")
    monkeypatch.setattr(progress, "INTERVAL", 0.01)
    src = tmp_path / "tiny.cpp"
    src.write_text('extern "C" int answer() { return 42; }\n')
    out = tmp_path / "cache" / "tiny.so"
    cxx_build.build(src, out, "g++", ("-shared", "-fPIC"), tmp_path, src.name)
    first = capsys.readouterr().err
    assert "building the native executor (tiny.cpp), once" in first
    cxx_build.build(src, out, "g++", ("-shared", "-fPIC"), tmp_path, src.name)
    assert capsys.readouterr().err == ""      # built: found, not built again


def test_tune_shows_it_is_working(tmp_path, monkeypatch, capsys):
    """The tune command keeps a line with the elapsed time while the tuner works."""
    from types import SimpleNamespace

    from msccl_py.cli import main
    from msccl_py.tuning import report
    from msccl_py.tuning import tune as tuner
    monkeypatch.setenv(progress.ENV, "1")
    monkeypatch.setattr(progress, "INTERVAL", 0.01)
    seen = []

    def slow_tune(*args, **kwargs):       # the tuner's work, without its minutes
        for _ in range(200):
            seen.append(capsys.readouterr().err)
            if "\rtune allgather on mi300x: (0 s)" in "".join(seen):
                break
            progress.time.sleep(0.01)
        return SimpleNamespace(candidates=[], files=[], skipped=[])
    monkeypatch.setattr(tuner, "tune", slow_tune)
    monkeypatch.setattr(report, "table", lambda result: "")
    monkeypatch.setattr(report, "load_line", lambda result: "")
    assert main(["tune", "--collective", "allgather", "--topology", "mi300x", "-o",
                 str(tmp_path / "algos")]) == 0
    assert "\rtune allgather on mi300x: (0 s)" in "".join(seen)
