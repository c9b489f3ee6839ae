"""@library_program and program(): the declaration on a build function and the build it runs."""

import doctest

import pytest

from msccl_py import library
from msccl_py.errors import ProgramError
from msccl_py.language import Buffer, chunk
from msccl_py.language.collectives import AllGather, Broadcast
from msccl_py.library import declare, prelude
from msccl_py.library.declare import declared, library_program, program
from msccl_py.library.spec import Param
from msccl_py.topologies import fully_connected


@pytest.mark.parametrize("module", [declare, prelude])
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


@library_program("broadcast", "root sends to every rank", min_ranks=1,
                 params=(Param("root", int, 0, "root", low=0),),
                 protocols=("LL", "LL128", "Simple"))
def star_broadcast(n, root=0):
    """Every rank gets the root's buffer in one step."""
    with program(Broadcast(n, 1, False, root)):
        for r in range(n):
            chunk(root, Buffer.input, 0).copy(r, Buffer.output, 0)


def test_builder_gets_request_settings_and_declared_default_protocol():
    prog = star_broadcast(4, root=2)
    assert (prog.name, prog.num_ranks, prog.instances, prog.protocol) == \
        ("star_broadcast", 4, 1, "LL")
    assert prog.check()
    prog = star_broadcast(3, 2, "Simple", 1)  # positional: instances, protocol, then params
    assert (prog.instances, prog.protocol, prog.collective.root) == (2, "Simple", 1)


def test_builder_keeps_name_and_docstring_and_carries_the_spec():
    assert star_broadcast.__name__ == "star_broadcast"
    assert star_broadcast.__doc__.startswith("Every rank gets")
    spec = star_broadcast.spec
    assert (spec.name, spec.build, spec.operation, spec.protocol) == \
        ("star_broadcast", "star_broadcast", "broadcast", "LL")
    assert spec.source.endswith("test_declare.py")
    assert declared(globals()) == [spec]


def test_program_takes_topology_name_and_options():
    @library_program("allgather", "demo")
    def named(n):
        with program(AllGather(n, 1, True), fully_connected(n + 2), f"named_{n}",
                     instr_fusion=False):
            for r in range(n):
                for peer in range(n):
                    if peer != r:
                        chunk(r, Buffer.output, r).copy(peer, Buffer.output, r)
    prog = named(3)
    assert prog.name == "named_3" and prog.topo.num_nodes() == 5 and not prog.instr_fusion
    assert prog.check()


def test_program_outside_a_build_names_the_line():
    with pytest.raises(ProgramError, match=r"outside a build.*@library_program") as info:
        program(AllGather(2, 1, False))
    assert info.value.file.endswith("test_declare.py") and info.value.line


def test_second_program_in_one_build_is_an_error():
    @library_program("allgather", "demo")
    def twice(n):
        with program(AllGather(n, 1, False)):
            pass
        with program(AllGather(n, 1, False)):
            pass
    with pytest.raises(ProgramError, match="program twice opens a second program"):
        twice(2)


def test_build_that_opens_no_program_is_an_error():
    @library_program("allgather", "demo")
    def empty(n):
        return None
    with pytest.raises(ProgramError, match="program empty opened no program"):
        empty(2)


def test_failed_build_leaves_no_request_behind():
    @library_program("allgather", "demo")
    def failing(n):
        with program(AllGather(n, 1, False)):
            raise ProgramError("boom")
    with pytest.raises(ProgramError, match="boom"):
        failing(2)
    with pytest.raises(ProgramError, match="outside a build"):
        program(AllGather(2, 1, False))


def test_nested_build_restores_the_outer_request():
    @library_program("allgather", "demo", protocols=("LL", "Simple"))
    def outer(n):
        inner = star_broadcast(n, protocol="Simple")
        with program(AllGather(n, 1, True)) as prog:
            for r in range(n):
                for peer in range(n):
                    if peer != r:
                        chunk(r, Buffer.output, r).copy(peer, Buffer.output, r)
        assert inner.name == "star_broadcast" and prog.name == "outer"
    assert outer(3).protocol == "LL"


def test_declared_parameter_the_function_lacks_is_an_error():
    with pytest.raises(ProgramError, match="declares parameter 'chunks', which nochunks\\(\\) "
                                           "does not take"):
        @library_program("allgather", "demo", params=(Param("chunks", int, 1, "c"),))
        def nochunks(n):
            pass


def test_build_function_taking_instances_or_protocol_is_an_error():
    with pytest.raises(ProgramError, match="takes 'protocol', which its builder keeps"):
        @library_program("allgather", "demo")
        def own_protocol(n, protocol="LL"):
            pass


def test_bad_declaration_is_a_program_error():
    with pytest.raises(ProgramError, match="unknown operation 'allsum'"):
        @library_program("allsum", "demo")
        def allsum(n):
            pass


def test_main_runs_the_shared_command_line(capsys):
    assert star_broadcast.main(["3", "--root", "2", "--protocol", "Simple"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("<algo") and 'coll="broadcast"' in out and 'proto="Simple"' in out
    assert star_broadcast.main(["3", "--root", "3"]) == 2
    assert capsys.readouterr().err.startswith("error: root 3 is not a rank")


DECLARED = '''
"""A declared program for registry tests."""
from msccl_py.library.prelude import *


@library_program("allgather", "demo", params=(Param("hops", int, 1, "unused", low=1, high=3),))
def {name}(n, hops=1):
    """Build the demo."""
    with program(AllGather(n, 1, False)):
        for r in range(n):
            for peer in range(n):
                chunk(r, Buffer.input, 0).copy(peer, Buffer.output, r)
'''


def test_registry_finds_declared_programs(program_dir):
    program_dir("zz_declared", DECLARED.replace("{name}", "zz_declared"))
    spec = library.get("zz_declared")
    assert (spec.operation, spec.build, spec.params[0].name) == ("allgather", "zz_declared",
                                                                 "hops")
    alg = library.compile("zz_declared", 3, protocol="LL", use_cache=False, hops=2)
    assert alg.collective == "allgather" and alg.protocol == "LL"


def test_imported_declared_program_is_not_listed_twice(program_dir):
    path = program_dir("zz_declared", DECLARED.replace("{name}", "zz_declared"))
    # a second file that imports the first one's program and declares its own
    program_dir("zz_importer", f'''
import importlib.util
spec = importlib.util.spec_from_file_location("zz_other", {str(path)!r})
other = importlib.util.module_from_spec(spec)
spec.loader.exec_module(other)
zz_declared = other.zz_declared
''' + DECLARED.replace("{name}", "zz_importer").split('"""\n', 1)[1])
    assert library.load_errors() == {}
    assert {"zz_declared", "zz_importer"} <= set(library.names())
    assert library.get("zz_importer").source.endswith("zz_importer.py")
