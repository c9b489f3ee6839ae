"""Finding programs: the shipped library and extra directories on MSCCL_PY_PROGRAMS."""

import pytest

from msccl_py import library
from msccl_py.errors import ProgramError
from msccl_py.library import registry

EXPECTED = {
    "allreduce": {"allreduce_ring", "allreduce_allpairs", "allreduce_oneshot",
                  "allreduce_recursive_halving_doubling", "allreduce_binomial_tree",
                  "allreduce_hierarchical", "allreduce_rs_ag"},
    "allgather": {"allgather_ring", "allgather_recursive_doubling", "allgather_allpairs",
                  "allgather_hierarchical"},
    "reduce_scatter": {"reduce_scatter_ring", "reduce_scatter_recursive_halving",
                       "reduce_scatter_allpairs"},
    "alltoall": {"alltoall_allpairs", "alltoall_two_step", "alltoall_three_step"},
    "broadcast": {"broadcast_binomial_tree", "broadcast_chain", "broadcast_scatter_allgather"},
    "reduce": {"reduce_binomial_tree", "reduce_rs_gather"},
    "gather": {"gather_linear", "gather_binomial"},
    "scatter": {"scatter_linear", "scatter_binomial"},
    "barrier": {"barrier_dissemination"},
    "alltonext": {"alltonext_forward", "alltonext_backward", "send_to_next_pipeline"},
}


def test_library_has_every_program():
    assert library.load_errors() == {}
    by_op = {}
    for spec in library.programs():
        by_op.setdefault(spec.operation, set()).add(spec.name)
    for op, names in EXPECTED.items():
        assert names <= by_op.get(op, set()), op
    assert len(library.names()) >= 29


def test_every_spec_is_coherent():
    for spec in library.programs():
        assert spec.source.endswith(".py")
        assert spec.description
        entry = registry.entry(spec.name)
        assert callable(entry.builder)
        # the default protocol is one the program is meant for, defaults satisfy their ranges
        assert spec.protocol in spec.protocols
        for p in spec.params:
            if p.default is not None:
                assert p.convert(p.default, spec.name) == p.default
        assert spec.min_bytes <= (spec.max_bytes if spec.max_bytes is not None else 1 << 62)


def test_unknown_name_suggests():
    with pytest.raises(ProgramError, match="unknown program 'allreduce_rin'.*allreduce_ring"):
        library.get("allreduce_rin")
    # a misspelling that is no substring: letters swapped
    with pytest.raises(ProgramError, match="unknown program 'allreduce_rnig'; did you mean "
                                           "`allreduce_ring`"):
        library.get("allreduce_rnig")
    with pytest.raises(ProgramError, match="see `msccl-py list`"):
        library.get("nothing_like_it")


def test_extra_directory(program_dir):
    program_dir("zz_demo")
    assert "zz_demo" in library.names()
    assert "allreduce_ring" in library.names()
    alg = library.compile("zz_demo", 3, hops=2)
    assert alg.collective == "allgather" and alg.ngpus == 3


def test_broken_program_is_reported_not_fatal(program_dir):
    program_dir("zz_demo")
    path = program_dir("zz_broken", "def oops(:\n")
    program_dir("zz_nospec", "X = 1\n")
    errors = library.load_errors()
    assert path in errors and "SyntaxError" in errors[path]
    assert "zz_demo" in library.names() and "zz_nospec" not in library.names()
    with pytest.raises(ProgramError, match="zz_broken failed to load from .*SyntaxError"):
        library.get("zz_broken")


def test_spec_naming_a_missing_function(program_dir):
    text = ("from msccl_py.library.spec import ProgramSpec\n"
            "SPEC = ProgramSpec('zz_x', 'barrier', 'd', build='nope')\n")
    path = program_dir("zz_x", text)
    assert "names build function 'nope'" in library.load_errors()[path]


def test_duplicate_names_are_an_error(program_dir):
    program_dir("zz_one", name="zz_same")
    program_dir("zz_two", name="zz_same")
    with pytest.raises(ProgramError, match="program name 'zz_same' is already defined"):
        library.names()


def test_earlier_directory_hides_later_file(program_dir, tmp_path):
    # a user file named like a shipped program replaces it
    program_dir("allreduce_ring", name="allreduce_ring")
    spec = library.get("allreduce_ring")
    assert spec.operation == "allgather" and str(tmp_path) in spec.source


def test_search_path_order(program_dir, tmp_path):
    dirs = registry.search_path()
    assert dirs[0] == tmp_path / "programs"
    checkout = registry._PACKAGE.parents[1] / "programs"
    if checkout.is_dir():
        assert dirs[1] == checkout


def test_installed_layout_finds_the_shipped_copy(tmp_path, monkeypatch):
    """A non-editable install has no checkout: programs come from msccl_py/library/programs."""
    package = tmp_path / "site" / "msccl_py" / "library"
    (package / "programs").mkdir(parents=True)
    shipped = registry._PACKAGE / "programs"
    for name in ("gather_linear.py", "scatter_linear.py"):
        (package / "programs" / name).write_text((shipped / name).read_text())
    monkeypatch.delenv("MSCCL_PY_PROGRAMS", raising=False)
    monkeypatch.setattr(registry, "_PACKAGE", package)
    registry.reload()
    assert registry.search_path() == [package / "programs"]
    assert library.names() == ["gather_linear", "scatter_linear"]
    assert library.compile("scatter_linear", 3, use_cache=False).collective == "scatter"


def test_checkout_ships_programs_as_package_data():
    shipped = registry._PACKAGE / "programs"
    checkout = registry._PACKAGE.parents[1] / "programs"
    if not checkout.is_dir():
        pytest.skip("installed package: no checkout")
    assert shipped.resolve() == checkout.resolve()
