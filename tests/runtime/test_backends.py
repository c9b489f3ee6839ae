"""One backend registry: a registration is all it takes for the CLI and launch to find one."""

from __future__ import annotations

import pytest

from msccl_py.errors import MscclRuntimeError
from msccl_py.plan import contract
from msccl_py.runtime import backends, reference


def test_one_registration_makes_a_backend(monkeypatch):
    monkeypatch.setitem(contract.BACKENDS, "mine", contract.Backend(
        "mine", ("float32",), ("sum",), run="msccl_py.runtime.reference:run"))
    mine = backends.get("mine")
    assert mine.run is reference.run and mine.devices == "cpu" and mine.processes == "one"
    assert "mine" in backends.runnable() and "mine" not in backends.communicators()
    from msccl_py.cli.backends import get_backend
    assert get_backend("mine") is reference.run


def test_unknown_and_unavailable_backends_are_one_line_errors(monkeypatch):
    with pytest.raises(MscclRuntimeError, match=r"unknown backend 'nope'; choose one of "
                                                r"reference, shm, cupy, emulated"):
        backends.get("nope")
    monkeypatch.setitem(contract.BACKENDS, "gone", contract.Backend(
        "gone", (), (), run="msccl_py.runtime.no_such_module:run"))
    with pytest.raises(MscclRuntimeError, match="backend 'gone' is unavailable here"):
        _ = backends.get("gone").run


def test_executor_tables_are_not_backends_by_name():
    assert set(backends.runnable()) == {"reference", "shm", "cupy", "emulated"}
    assert backends.communicators() == ("shm", "cupy")
    assert backends.launcher("reference") is None
