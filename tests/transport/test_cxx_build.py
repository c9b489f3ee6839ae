"""The one ctypes loader: a failed build is noted once (auto) or raised every time (native)."""

import ctypes.util

import pytest

from msccl_py.errors import MscclRuntimeError
from msccl_py.transport import cxx_build


def _failing_library(calls: list) -> cxx_build.Library:
    def build():
        calls.append("build")
        raise MscclRuntimeError("no C++ compiler (g++, or $CXX) was found\nmore detail")
    return cxx_build.Library(build, lambda lib: None, "MSCCL_PY_X", "the thing runs in Python")


def test_python_mode_never_builds():
    calls: list = []
    assert _failing_library(calls).get("python") is None
    assert calls == []


def test_a_failed_build_is_noted_once_then_refused_in_native_mode(capsys):
    calls: list = []
    lib = _failing_library(calls)
    assert lib.get("auto") is None
    assert lib.get("auto") is None
    assert calls == ["build"]
    assert capsys.readouterr().err.splitlines() == [
        "msccl_py: the thing runs in Python: no C++ compiler (g++, or $CXX) was found"]
    with pytest.raises(MscclRuntimeError, match=r"^MSCCL_PY_X=native but no C\+\+ compiler"):
        lib.get("native")
    assert calls == ["build"]


def test_native_mode_raises_without_a_note(capsys):
    with pytest.raises(MscclRuntimeError, match="MSCCL_PY_X=native but no C"):
        _failing_library([]).get("native")
    assert capsys.readouterr().err == ""


def test_a_layout_mismatch_is_a_failure(capsys):
    libc = ctypes.util.find_library("c") or "libc.so.6"

    def bind(lib):
        assert lib.getpid() > 0      # it was opened
        raise MscclRuntimeError("table layout differs (abi 1 != 2)")
    lib = cxx_build.Library(lambda: libc, bind, "MSCCL_PY_X", "fallback")
    assert lib.get("auto") is None
    assert "table layout differs" in capsys.readouterr().err
