"""Parameter declarations, rank rules and the default node split."""

from pathlib import Path

import pytest

from msccl_py import library
from msccl_py.errors import ProgramError
from msccl_py.library.spec import Param, ProgramSpec, default_split


def spec(**kw):
    base = dict(name="p", operation="allreduce", description="d", build="b",
                params=(Param("channels", int, 1, low=1, high=4),
                        Param("mode", str, "ring", choices=("ring", "tree")),
                        Param("inplace", bool, True),
                        Param("gpus_per_node", int, None, low=1)))
    base.update(kw)
    return ProgramSpec(**base)


@pytest.mark.parametrize("param,text,value", [
    (Param("k", int, 1), "12", 12), (Param("k", bool, True), "no", False),
    (Param("k", bool, False), "TRUE", True), (Param("k", float, 1.0), "2.5", 2.5),
    (Param("k", str, "a", choices=("a", "b")), "b", "b"), (Param("k", int, None), None, None),
    (Param("k", str, None), Path("machines") / "x.json", "machines/x.json"),
])
def test_convert(param, text, value):
    assert param.convert(text, "p") == value


@pytest.mark.parametrize("param,value,message", [
    (Param("k", int, 1), "x", "parameter k must be an integer, got 'x'"),
    (Param("k", int, 1, low=2), 1, "at least 2, got 1"),
    (Param("k", int, 1, high=4), "5", "at most 4, got 5"),
    (Param("k", bool, True), "maybe", "true or false"),
    (Param("k", bool, True), 1, "true or false"),
    (Param("k", int, 1), True, "must be an integer"),
    (Param("k", str, "a", choices=("a", "b")), "c", "one of a, b, got 'c'"),
    (Param("k", str, None), -1, "parameter k must be text, got -1"),
    (Param("k", str, "a", choices=("a", "b")), 1.5, "parameter k must be text, got 1.5"),
])
def test_convert_errors_name_the_parameter(param, value, message):
    with pytest.raises(ProgramError, match=message):
        param.convert(value, "p")


@pytest.mark.parametrize("value", [-1, 10**6, ["ndv5"]])
def test_text_parameter_of_the_wrong_type_is_a_program_error(value):
    with pytest.raises(ProgramError, match=r"nccl_ring: parameter topology must be text, got "):
        library.compile_xml("nccl_ring", 8, topology=value, use_cache=False)


def test_resolve_fills_defaults_and_checks():
    s = spec()
    assert s.resolve(4, {"channels": "2"}) == {"channels": 2, "mode": "ring", "inplace": True,
                                               "gpus_per_node": None}
    with pytest.raises(ProgramError, match="has no parameter 'chanels'.*channels, mode"):
        s.resolve(4, {"chanels": 2})


@pytest.mark.parametrize("kw,n,good,message", [
    ({"power_of_two": True}, 6, 8, "power-of-two rank count, got 6"),
    ({"min_ranks": 4}, 3, 4, "at least 4 ranks, got 3"),
    ({"max_ranks": 8}, 9, 8, "at most 8 ranks, got 9"),
    ({"rank_check": lambda n, v: "odd" if n % 2 else None}, 5, 6, "p: odd"),
])
def test_rank_rules(kw, n, good, message):
    s = spec(**kw)
    assert not s.supports(n)
    with pytest.raises(ProgramError, match=message):
        s.resolve(n, {})
    assert s.supports(good)


def test_texts_for_listing():
    s = spec(power_of_two=True, min_bytes=4096, max_bytes=1 << 20)
    assert s.ranks_text == "2^k >= 2"
    assert s.size_text == "4K-1M"
    assert [p.describe() for p in s.params] == ["channels=1[1..4]", "mode=ring{ring,tree}",
                                                "inplace=True", "gpus_per_node=auto[1..]"]
    assert spec().size_text == "0-inf"


def test_bad_declarations():
    with pytest.raises(ProgramError, match="unknown operation 'allreduc'"):
        spec(operation="allreduc")
    with pytest.raises(ProgramError, match="bad protocols"):
        spec(protocols=("LL256",))


@pytest.mark.parametrize("n,g,split", [(8, None, (2, 4)), (16, None, (2, 8)), (32, None, (4, 8)),
                                       (6, None, (2, 3)), (5, None, (5, 1)), (1, None, (1, 1)),
                                       (12, 3, (4, 3)), (8, 8, (1, 8))])
def test_default_split(n, g, split):
    assert default_split(n, g) == split


def test_default_split_rejects_bad_node_size():
    with pytest.raises(ProgramError, match="10 ranks do not split into nodes of 4 GPUs"):
        default_split(10, 4)


def test_parse_param_values():
    assert library.parse_param_values("allreduce_binomial_tree", ["trees=2", "chunks = 3"]) == \
        {"trees": 2, "chunks": 3}
    with pytest.raises(ProgramError, match="must look like name=value"):
        library.parse_param_values("allreduce_binomial_tree", ["trees"])
    with pytest.raises(ProgramError, match="given twice"):
        library.parse_param_values("allreduce_binomial_tree", ["trees=1", "trees=2"])
    with pytest.raises(ProgramError, match="no parameter 'tree'"):
        library.parse_param_values("allreduce_binomial_tree", ["tree=1"])
    with pytest.raises(ProgramError, match="trees must be one of 1, 2, got 3"):
        library.parse_param_values("allreduce_binomial_tree", ["trees=3"])


def test_compile_checks_common_arguments():
    with pytest.raises(ProgramError, match="instances must be an integer in 1..8, got 0"):
        library.compile("allreduce_ring", 4, instances=0)
    with pytest.raises(ProgramError, match="unknown protocol 'LL64'"):
        library.compile("allreduce_ring", 4, protocol="LL64")
    with pytest.raises(ProgramError, match="rank count must be an integer"):
        library.compile("allreduce_ring", "4")


def test_script_command_line(capsys):
    from msccl_py.library import script
    spec = library.get("allreduce_hierarchical")
    build = library.registry.entry("allreduce_hierarchical").builder
    assert script.main(spec, build, ["8", "--ranks", "4"]) == 2
    assert "rank count given twice: 8 and --ranks 4" in capsys.readouterr().err
    assert script.main(spec, build, []) == 2
    assert "give the rank count" in capsys.readouterr().err
    assert script.main(spec, build, ["8", "3"]) == 2
    assert "8 ranks do not split into nodes of 3 GPUs" in capsys.readouterr().err
    assert script.main(spec, build, ["--ranks", "8", "--inplace", "no"]) == 0
    assert 'inplace="0"' in capsys.readouterr().out
