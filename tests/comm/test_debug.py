"""``MSCCL_PY_DEBUG=INFO`` lines: NCCL-style prefix, size classes, one write per line."""

from __future__ import annotations

import io

from msccl_py.comm import debug


class Writes(io.StringIO):
    """A stderr that records each write call."""

    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return super().write(text)


def test_info_lines_are_written_whole(monkeypatch):
    """Launchers forward each rank's stderr as it comes: a line must leave in one write,
    or another rank's line lands between its text and its newline."""
    err = Writes()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setenv("MSCCL_PY_DEBUG", "INFO")
    debug.info(3, "hello")
    debug.info(3, "again")
    assert len(err.calls) == 2
    for call in err.calls:
        assert call.endswith("\n") and call.count("\n") == 1
        assert call.split(" ", 1)[0].endswith(":3") and " msccl_py INFO " in call


def test_quiet_unless_info(monkeypatch):
    err = Writes()
    monkeypatch.setattr("sys.stderr", err)
    for level in ("", "WARN", "warn"):
        monkeypatch.setenv("MSCCL_PY_DEBUG", level)
        debug.info(0, "nothing")
    monkeypatch.setenv("MSCCL_PY_DEBUG", "info")
    debug.info(0, "something")
    assert [c.split(" INFO ", 1)[1] for c in err.calls] == ["something\n"]


def test_size_classes():
    assert debug.size_class(0) == "0B"
    assert debug.size_class(148) == "128B-256B"
    assert debug.size_class(1 << 20) == "1MiB-2MiB"
    assert debug.size_class((1 << 30) + 1) == "1GiB-2GiB"
