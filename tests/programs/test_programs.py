"""Every library program: compiles, verifies, runs on the reference runtime with NumPy-checked
results, and meets the step count its algorithm is known for."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from msccl_py import library
from msccl_py.analysis import critical_path
from msccl_py.errors import LimitError, ProgramError
from msccl_py.library.spec import default_split

from harness import check_program

ROOT = Path(__file__).resolve().parents[2]
RANKS = (2, 3, 4, 8, 16)
PROTOCOLS = ("Simple", "LL", "LL128")


def _matrix():
    """(name, ranks, instances, protocol) for every supported combination.

    The default run covers every program at 2, 3 and 8 ranks (16 for
    hierarchical ones) with one instance in every protocol, plus two
    instances in the program's default protocol; the rest is marked slow.
    """
    out = []
    for spec in library.programs():
        for n in RANKS:
            if not spec.supports(n):
                continue
            for instances in (1, 2):
                for proto in PROTOCOLS:
                    if proto not in spec.protocols:
                        continue
                    fast = (n in (2, 3, 8) or (n == 16 and spec.hierarchical)) and (
                        instances == 1 or proto == spec.protocol)
                    marks = () if fast else (pytest.mark.slow,)
                    out.append(pytest.param(spec.name, n, instances, proto, marks=marks,
                                            id=f"{spec.name}-{n}-x{instances}-{proto}"))
    return out


@pytest.mark.parametrize("name,n,instances,protocol", _matrix())
def test_program_matrix(name, n, instances, protocol):
    if instances > 1:
        try:
            alg = check_program(name, n, instances, protocol)
        except LimitError as exc:
            # NCCL's patterns on two machines (nccl_ring, nccl_tree: 16 ranks) use 30
            # channels an instance: two instances are past every MSCCL runtime's 32, and
            # the refusal says so with the count
            assert re.search(r"uses \d+ channels; target \S+ allows at most 32", str(exc))
            return
    else:
        alg = check_program(name, n, instances, protocol)
    assert alg.protocol == protocol


VARIANTS = [
    ("allreduce_allpairs", 5, {"inplace": False}),
    ("allreduce_oneshot", 5, {"inplace": False}),
    ("allreduce_binomial_tree", 6, {"trees": 2, "chunks": 3}),
    ("allreduce_binomial_tree", 8, {"inplace": False}),
    ("allreduce_hierarchical", 12, {"gpus_per_node": 3}),
    ("allreduce_hierarchical", 8, {"gpus_per_node": 2, "inplace": False}),
    ("allreduce_hierarchical", 32, {"gpus_per_node": 8, "pieces": 3}),
    ("allreduce_hierarchical", 24, {"gpus_per_node": 4, "inplace": False}),
    ("allreduce_hierarchical", 12, {"gpus_per_node": 3, "inter": "ring"}),
    ("allreduce_hierarchical", 8, {"gpus_per_node": 2, "inter": "ring", "inplace": False}),
    ("allreduce_recursive_halving_doubling", 8, {"inplace": False}),
    ("allreduce_rs_ag", 8, {"rs": "allpairs", "ag": "doubling"}),
    ("allreduce_rs_ag", 6, {"rs": "ring", "ag": "allpairs", "inplace": False}),
    ("allreduce_rs_ag", 4, {"rs": "halving", "ag": "ring"}),
    ("allreduce_ring", 6, {"channels": 3}),
    ("allgather_ring", 5, {"channels": 2, "inplace": True}),
    ("allgather_recursive_doubling", 8, {"inplace": True}),
    ("allgather_allpairs", 5, {"inplace": True}),
    ("allgather_hierarchical", 12, {"gpus_per_node": 4, "inplace": True}),
    ("allgather_hierarchical", 32, {"gpus_per_node": 8}),
    ("allgather_hierarchical", 20, {"gpus_per_node": 2, "inplace": True}),
    ("allgather_hierarchical", 12, {"gpus_per_node": 4, "inter": "ring"}),
    ("reduce_scatter_hierarchical", 16, {"gpus_per_node": 8, "inplace": False}),
    ("reduce_scatter_hierarchical", 32, {"gpus_per_node": 8}),
    ("reduce_scatter_hierarchical", 20, {"gpus_per_node": 2}),
    ("allgather_pat", 13, {"inplace": True}),
    ("reduce_scatter_pat", 13, {"inplace": False}),
    ("reduce_scatter_ring", 5, {"chunks": 3, "inplace": False}),
    ("reduce_scatter_recursive_halving", 16, {"inplace": False}),
    ("reduce_scatter_allpairs", 6, {"inplace": False}),
    ("alltoall_allpairs", 4, {"chunks": 2}),
    ("alltoall_two_step", 12, {"gpus_per_node": 4}),
    ("alltoall_three_step", 12, {"gpus_per_node": 3}),
    ("alltoall_three_step", 12, {"gpus_per_node": 4}),
    ("broadcast_binomial_tree", 7, {"root": 4, "chunks": 2}),
    ("broadcast_chain", 5, {"root": 3, "chunks": 3}),
    ("broadcast_scatter_allgather", 6, {"root": 5, "allgather": "allpairs"}),
    ("broadcast_scatter_allgather", 5, {"root": 2}),
    ("reduce_binomial_tree", 7, {"root": 6, "chunks": 2}),
    ("reduce_rs_gather", 5, {"root": 4}),
    ("gather_linear", 5, {"root": 2, "chunks": 2}),
    ("gather_binomial", 7, {"root": 3, "chunks": 2}),
    ("gather_binomial", 6, {"root": 5}),
    ("scatter_linear", 5, {"root": 4, "chunks": 2}),
    ("scatter_binomial", 7, {"root": 3, "chunks": 2}),
    ("scatter_binomial", 12, {"root": 9}),
    ("send_to_next_pipeline", 5, {"chunks": 6, "channels": 3, "cyclic": True}),
]


@pytest.mark.parametrize("name,n,params", VARIANTS,
                         ids=[f"{v[0]}-{v[1]}-{'-'.join(f'{k}={x}' for k, x in v[2].items())}"
                              for v in VARIANTS])
def test_parameter_variants(name, n, params):
    check_program(name, n, 1, None, **params)


@pytest.mark.parametrize("op", ["sum", "max", "prod"])
def test_reductions_other_ops(op):
    for name, n in (("allreduce_recursive_halving_doubling", 4), ("reduce_rs_gather", 3),
                    ("reduce_scatter_allpairs", 5)):
        check_program(name, n, op=op, seed=7)


@pytest.mark.parametrize("name", ["allreduce_rs_ag", "allgather_allpairs", "reduce_scatter_ring",
                                  "alltoall_two_step", "broadcast_binomial_tree",
                                  "reduce_binomial_tree", "gather_linear", "scatter_linear",
                                  "barrier_dissemination", "send_to_next_pipeline"])
def test_one_rank_fallbacks(name):
    check_program(name, 1)


def _depth(n: int) -> int:
    """Depth of a binomial tree over n ranks: the most set bits of any relative rank."""
    return max(bin(v).count("1") for v in range(n))


def _hier_allreduce(n: int) -> int:
    """All-pairs in the node (1 step each way), double binary tree across (its depth each
    way)."""
    nodes, local = default_split(n)
    return 2 * (local > 1) + 2 * math.ceil(math.log2(nodes))


#: program -> critical path (communication steps) its algorithm is known to need
OPTIMAL = {
    "allreduce_ring": lambda n: 2 * (n - 1),
    "allreduce_rs_ag": lambda n: 2 * (n - 1),
    "allreduce_recursive_halving_doubling": lambda n: 2 * int(math.log2(n)),
    "allreduce_allpairs": lambda n: 2,
    "allreduce_oneshot": lambda n: 1,
    "allreduce_binomial_tree": lambda n: 2 * _depth(n),
    "allreduce_hierarchical": _hier_allreduce,
    "allgather_recursive_doubling": lambda n: int(math.log2(n)),
    "allgather_allpairs": lambda n: 1,
    "reduce_scatter_ring": lambda n: n - 1,
    "reduce_scatter_recursive_halving": lambda n: int(math.log2(n)),
    "reduce_scatter_allpairs": lambda n: 1,
    "alltoall_two_step": lambda n: 2 if default_split(n)[1] > 1 else 1,
    "alltoall_three_step": lambda n: 3 if default_split(n)[1] > 1 else 1,
    "broadcast_binomial_tree": _depth,
    "broadcast_chain": lambda n: n - 1,
    "broadcast_scatter_allgather": lambda n: n,
    "reduce_binomial_tree": _depth,
    "reduce_rs_gather": lambda n: n,
    "gather_linear": lambda n: 1,
    "gather_binomial": _depth,
    "scatter_linear": lambda n: 1,
    "scatter_binomial": _depth,
    "barrier_dissemination": lambda n: math.ceil(math.log2(n)),
    "send_to_next_pipeline": lambda n: 1,
    "allgather_ring": lambda n: n - 1,
    "alltoall_allpairs": lambda n: 1,
}


def _cp_cases():
    cases = []
    for name, formula in OPTIMAL.items():
        for n in (2, 3, 4, 5, 8, 16):
            if library.get(name).supports(n):
                cases.append(pytest.param(name, n, formula(n), id=f"{name}-{n}"))
    return cases


@pytest.mark.parametrize("name,n,steps", _cp_cases())
def test_critical_path_is_optimal(name, n, steps):
    """Ring allreduce needs 2(n-1) steps, recursive doubling log2 n, trees their depth, ...

    Measured on the XML text (read back), the artefact the runtimes load.
    """
    xml = pytest.importorskip("msccl_py.targets.msccl")
    alg = xml.read_xml(library.compile_xml(name, n, use_cache=False))
    assert critical_path(alg).length == steps


@pytest.mark.slow
@pytest.mark.parametrize("name,n", [("allreduce_rs_ag", 72), ("allreduce_hierarchical", 72),
                                    ("allreduce_recursive_halving_doubling", 128)])
def test_out_of_place_allreduce_past_the_count_bound(name, n):
    """The out-of-place input copy goes in pieces, so 72 chunks and more stay within the
    runtimes' count bound (one copy of n chunks was refused above 71 ranks)."""
    xml = pytest.importorskip("msccl_py.targets.msccl")
    alg = xml.read_xml(library.compile_xml(name, n, inplace=False, target="msccl",
                                           use_cache=False))
    assert alg.ngpus == n and max(step.count for _, tb in alg.threadblocks()
                                  for step in tb.steps) < 72


def test_instances_do_not_lengthen_the_critical_path():
    for name in ("allreduce_ring", "allgather_recursive_doubling", "allreduce_hierarchical"):
        one = critical_path(library.compile(name, 8, use_cache=False)).length
        two = critical_path(library.compile(name, 8, instances=2, use_cache=False)).length
        assert one == two


def test_every_declared_collective_is_covered():
    ops = {spec.operation for spec in library.programs()}
    assert ops >= {"allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast", "reduce",
                   "gather", "scatter", "barrier", "alltonext"}
    assert len(library.names()) >= 25


@pytest.mark.parametrize("name,n,params,message", [
    ("allreduce_recursive_halving_doubling", 6, {}, "power-of-two rank count, got 6"),
    ("allgather_recursive_doubling", 12, {}, "power-of-two rank count, got 12"),
    ("allreduce_rs_ag", 6, {"ag": "doubling"}, "power-of-two rank count, got 6"),
    ("allreduce_hierarchical", 10, {"gpus_per_node": 4}, "do not split into nodes of 4"),
    ("broadcast_chain", 4, {"root": 4}, "root 4 is not a rank of 4"),
    ("allreduce_binomial_tree", 4, {"trees": 3}, "must be one of 1, 2"),
    ("alltonext_backward", 12, {}, "whole nodes of 8 GPUs"),
])
def test_bad_requests_are_clear(name, n, params, message):
    with pytest.raises(ProgramError, match=message):
        library.compile(name, n, use_cache=False, **params)


def test_builders_validate_on_their_own():
    """Calling a program's function directly (not through the registry) checks too."""
    from msccl_py.library.registry import entry
    with pytest.raises(ProgramError, match="power-of-two rank count, got 6"):
        entry("reduce_scatter_recursive_halving").builder(6)
    with pytest.raises(ProgramError, match="channels must be in 1..chunks"):
        entry("send_to_next_pipeline").builder(4, chunks=2, channels=3)


@pytest.mark.parametrize("argv", [["8", "--instances", "2", "--protocol", "LL"],
                                  ["--ranks", "8", "--gpus-per-node", "2"], ["8", "4"]])
def test_program_runs_as_a_script(argv):
    name = "allreduce_hierarchical"
    out = subprocess.run([sys.executable, str(ROOT / "programs" / f"{name}.py"), *argv],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    xml = pytest.importorskip("msccl_py.targets.msccl")
    alg = xml.read_xml(out.stdout)
    assert alg.ngpus == 8 and alg.collective == "allreduce"
    if "LL" in argv:
        assert alg.protocol == "LL"


def test_script_reports_bad_arguments():
    script = ROOT / "programs" / "allgather_recursive_doubling.py"
    out = subprocess.run([sys.executable, str(script), "--ranks", "6"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2
    assert "power-of-two rank count, got 6" in out.stderr
    assert out.stdout == ""


def _regime_sizes(spec, alg) -> list[int]:
    """Call sizes (bytes as the runtimes count them) at both ends of the declared range."""
    unit = alg.nchunksperloop * 4
    scale = alg.ngpus if spec.operation in ("allgather", "gather") else 1
    low = max(spec.min_bytes * scale, unit)
    high = (spec.max_bytes if spec.max_bytes is not None else 256 << 20) * scale
    return sorted({-(-low // unit) * unit, max(unit, high // unit * unit)})


def _declared_cases():
    out = []
    for spec in library.programs():
        sizes = (16,) if spec.hierarchical else (8, 16) if spec.ranks_note == "8k" else (8,)
        out += [pytest.param(spec.name, n, id=f"{spec.name}-{n}") for n in sizes]
    return out


@pytest.mark.parametrize("name,n", _declared_cases())
def test_xml_verifies_in_declared_regime(name, n):
    """The XML text itself (read back, not the compiler's IR) is correct and deadlock-free at
    the ends of the size range the program declares; hierarchical ones run as 2 × 8."""
    xml = pytest.importorskip("msccl_py.targets.msccl")
    from msccl_py.verify import verify
    spec = library.get(name)
    text = library.compile_xml(name, n, use_cache=False)
    alg = xml.read_xml(text)
    if spec.hierarchical:
        assert default_split(n) == (2, 8)  # the 2 x 8 layout
    target = "msccl" if alg.collective == "custom" else "msccl-executor"
    for nbytes in _regime_sizes(spec, alg):
        verdict = verify(alg, target=target, nbytes=nbytes)
        assert verdict.status == "ok", f"{name} at {nbytes} bytes: {verdict}"


def test_program_docstring_examples():
    """The examples in each program file's docstrings run."""
    import doctest
    from msccl_py.library.registry import entries
    modules = {id(e.module): e.module for e in entries().values()}
    attempted = 0
    for module in modules.values():
        result = doctest.testmod(module, verbose=False)
        assert result.failed == 0, module.__file__
        attempted += result.attempted
    assert attempted > 0


def test_program_files_show_a_command_line_and_document_parameters():
    """Each file shows how to run it; a build docstring's Parameters paragraph names every
    declared parameter."""
    from msccl_py.library.registry import entries
    for name, entry in entries().items():
        doc = getattr(entry.builder, "__doc__", None) or ""
        assert f"python programs/{entry.path.name}" in (entry.module.__doc__ or "") + doc, name
        if "Parameters:" in doc:
            for param in entry.spec.params:
                assert f"``{param.name}``" in doc, (name, param.name)


def test_readme_shows_a_program_file_as_it_is():
    readme = (ROOT / "programs" / "README.md").read_text()
    assert "```python\n" + (ROOT / "programs" / "gather_linear.py").read_text() + "```" in readme


def test_runtime_limits_are_reported_the_same_with_and_without_cache(tmp_path):
    from msccl_py.errors import LimitError
    for use_cache in (False, True):
        with pytest.raises(LimitError, match="uses 48 channels.*at most 32"):
            library.compile("alltoall_three_step", 16, instances=8, use_cache=use_cache,
                            cache_dir=tmp_path)


def test_compile_command_runs_program_files(capsys):
    """`msccl-py compile [--target T] programs/<name>.py ARGS` captures the script's XML."""
    from msccl_py.cli import main
    path = str(ROOT / "programs" / "reduce_scatter_ring.py")
    assert main(["compile", "--target", "rccl", path, "4", "--chunks", "2"]) == 0
    out = capsys.readouterr().out
    assert 'coll="reducescatter"' in out and 'nchunksperloop="8"' in out
    assert main(["compile", str(ROOT / "programs" / "barrier_dissemination.py"), "5"]) == 0
    assert 'coll="custom"' in capsys.readouterr().out
