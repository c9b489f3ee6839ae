"""Isolate the library's caches: every test gets its own cache directory and a fresh registry."""

import pytest

from msccl_py.library import build, registry


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MSCCL_PY_CACHE", str(tmp_path / "cache"))
    build._memo.clear()
    yield
    build._memo.clear()
    registry.reload()


DEMO = '''
"""A demo program for registry tests."""
from msccl_py.language import *
from msccl_py.language.collectives import AllGather
from msccl_py.library.spec import Param, ProgramSpec
from msccl_py.topologies import fully_connected

BUILDS = []


def demo(num_ranks, instances=1, protocol="Simple", hops=1):
    BUILDS.append((num_ranks, instances, protocol, hops))
    with MSCCLProgram("{name}", fully_connected(num_ranks), AllGather(num_ranks, 1, False),
                      instances, protocol=protocol) as prog:
        for r in range(num_ranks):
            c = chunk(r, Buffer.input, 0)
            c.copy(r, Buffer.output, r)
            for peer in range(num_ranks):
                if peer != r:
                    c.copy(peer, Buffer.output, r)
    return prog


SPEC = ProgramSpec("{name}", "allgather", "demo", build="demo",
                   params=(Param("hops", int, 1, "unused", low=1, high=3),))
'''


@pytest.fixture
def program_dir(tmp_path, monkeypatch):
    """A directory on MSCCL_PY_PROGRAMS; ``write(stem, text)`` adds a program file."""
    d = tmp_path / "programs"
    d.mkdir()
    monkeypatch.setenv("MSCCL_PY_PROGRAMS", str(d))
    registry.reload()

    def write(stem, text=None, name=None):
        path = d / f"{stem}.py"
        path.write_text(text if text is not None else DEMO.replace("{name}", name or stem))
        registry.reload()
        return path
    return write
