"""The on-disk compile cache: hits, invalidation, configuration and concurrent writers."""

import json
import multiprocessing
import os

import pytest

from msccl_py import library
from msccl_py.errors import MscclError
from msccl_py.library import build, registry
from msccl_py.toolchain import algorithm_from_json


def entries(directory):
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def builds(name):
    return registry.entry(name).module.BUILDS


def test_hit_skips_the_build(program_dir, tmp_path):
    program_dir("zz_demo")
    first = library.compile("zz_demo", 4)
    assert len(builds("zz_demo")) == 1
    assert len(entries(tmp_path / "cache")) == 1
    build._memo.clear()  # a new process: only the disk cache is left
    second = library.compile("zz_demo", 4)
    assert len(builds("zz_demo")) == 1
    assert second == first
    second.name = "mutated"
    assert library.compile("zz_demo", 4).name == first.name  # callers get their own copy


def test_key_covers_parameters(program_dir, tmp_path):
    program_dir("zz_demo")
    library.compile("zz_demo", 4)
    library.compile("zz_demo", 4, hops=2)
    library.compile("zz_demo", 4, instances=2)
    library.compile("zz_demo", 4, protocol="LL")
    library.compile("zz_demo", 5)
    assert len(builds("zz_demo")) == 5
    assert len(entries(tmp_path / "cache")) == 5


def test_editing_the_program_invalidates(program_dir):
    path = program_dir("zz_demo")
    library.compile("zz_demo", 4)
    path.write_text(path.read_text() + "\n# edited\n")
    registry.reload()
    build._memo.clear()
    library.compile("zz_demo", 4)
    assert len(builds("zz_demo")) == 1  # the reloaded module built it afresh


def test_cache_dir_argument_and_env(program_dir, tmp_path, monkeypatch):
    program_dir("zz_demo")
    library.compile("zz_demo", 2, cache_dir=tmp_path / "elsewhere")
    assert len(entries(tmp_path / "elsewhere")) == 1
    assert entries(tmp_path / "cache") == []
    monkeypatch.delenv("MSCCL_PY_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert library.cache_dir() == tmp_path / "xdg" / "msccl_py"


def test_no_cache(program_dir, tmp_path):
    program_dir("zz_demo")
    library.compile("zz_demo", 3, use_cache=False)
    library.compile("zz_demo", 3, use_cache=False)
    assert len(builds("zz_demo")) == 2
    assert entries(tmp_path / "cache") == []


def test_unreadable_entry_is_rebuilt(program_dir, tmp_path):
    program_dir("zz_demo")
    library.compile("zz_demo", 3)
    [name] = entries(tmp_path / "cache")
    (tmp_path / "cache" / name).write_text("<algo broken")
    build._memo.clear()
    alg = library.compile("zz_demo", 3)
    assert alg.ngpus == 3 and len(builds("zz_demo")) == 2
    assert algorithm_from_json((tmp_path / "cache" / name).read_text()) == alg


def test_a_hit_gives_back_the_ir_a_build_returns(tmp_path):
    """The IR is stored as IR, not as XML read back: a verified maxBytes, the root and
    every step come back as the build made them."""
    cold = library.compile("broadcast_binomial_tree", 4, root=2)
    [name] = entries(tmp_path / "cache")
    assert name.endswith(".ir.json")
    build._memo.clear()
    warm = library.compile("broadcast_binomial_tree", 4, root=2)
    assert warm == cold and warm.root == 2
    assert warm == library.compile("broadcast_binomial_tree", 4, root=2, use_cache=False)


def test_compile_xml_is_cached_per_target(tmp_path):
    old = library.compile_xml("reduce_scatter_ring", 4, target="msccl")
    new = library.compile_xml("reduce_scatter_ring", 4, target="msccl-executor")
    assert 'coll="reduce_scatter"' in old and 'coll="reducescatter"' in new
    assert len(entries(tmp_path / "cache")) == 2
    assert library.compile_xml("reduce_scatter_ring", 4, target="msccl") == old


def test_a_hit_says_the_notes_the_build_made(tmp_path):
    first = build.xml_artifact("barrier_dissemination", 4)
    again = build.xml_artifact("barrier_dissemination", 4)
    assert again.text == first.text and again.target == first.target == "msccl"
    assert again.notes == first.notes and "runs only on target msccl" in first.notes[0]


def test_unwritable_cache_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(MscclError, match="cannot (read|write) cache entry .*file/"):
        library.compile("allgather_allpairs", 2, cache_dir=blocker)


def _compile_in_child(cache):
    return library.compile_xml("allreduce_recursive_halving_doubling", 8, cache_dir=cache)


def test_concurrent_writers_agree(tmp_path):
    cache = tmp_path / "shared"
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(3) as pool:
        texts = pool.map(_compile_in_child, [cache] * 6)
    assert len(set(texts)) == 1
    names = entries(cache)
    assert len(names) == 1 and names[0].endswith(".xml.json")  # no temporary files left behind
    assert json.loads((cache / names[0]).read_text())["text"] == texts[0]
    assert not [n for n in os.listdir(cache) if n.endswith(".tmp")]


def test_toolchain_hash_covers_the_library_modules_programs_build_with():
    """A library module that issues DSL calls for programs (patterns, rooted trees, custom
    collectives, the program a declared build opens, the names programs import) changes
    compiled output when edited, so its source is in the cache key."""
    import re
    from pathlib import Path

    from msccl_py.library import cache
    builds = re.compile(r"^from msccl_py\.language(\.collectives)? import "
                        r".*(\b(chunk|Collective|MSCCLProgram)\b|\*)", re.M)
    library_dir = Path(cache.__file__).parent
    dsl_modules = {f"library/{path.name}" for path in library_dir.glob("*.py")
                   if builds.search(path.read_text())}
    assert {"library/patterns.py", "library/rooted.py", "library/collectives_extra.py",
            "library/declare.py", "library/prelude.py"} <= dsl_modules
    assert dsl_modules <= set(cache._TOOLCHAIN)


def test_cache_keeps_under_its_cap_least_recently_used_first(tmp_path, monkeypatch):
    import os

    from msccl_py.library import cache
    monkeypatch.setenv(cache.ENV_CACHE_MAX, "3KiB")
    keys = [f"{k:064x}" for k in range(4)]
    for age, key in enumerate(keys[:3]):
        path = cache.store(tmp_path, key, "x" * 1000, cache.XML)
        os.utime(path, (1000 + age, 1000 + age))          # written in order, long ago
    assert cache.load(tmp_path, keys[0], cache.XML) == "x" * 1000   # the oldest, used now
    cache.store(tmp_path, keys[3], "y" * 1000, cache.IR)            # 4000 B > 3 KiB
    left = sorted(p.name for p in tmp_path.iterdir())
    # the least recently used (keys[1]) went; the one just read and the new one stayed
    assert left == sorted([f"{keys[0]}{cache.XML}", f"{keys[2]}{cache.XML}",
                           f"{keys[3]}{cache.IR}"])
    # an entry over the cap by itself is not written at all
    cache.store(tmp_path, "f" * 64, "z" * 4000, cache.XML)
    assert cache.load(tmp_path, "f" * 64, cache.XML) is None


def test_cache_cap_is_a_size(monkeypatch):
    from msccl_py.errors import MscclError
    from msccl_py.library import cache
    monkeypatch.setenv(cache.ENV_CACHE_MAX, "500MiB")
    assert cache.size_cap() == 500 << 20
    monkeypatch.delenv(cache.ENV_CACHE_MAX)
    assert cache.size_cap() == cache.DEFAULT_CACHE_MAX
    monkeypatch.setenv(cache.ENV_CACHE_MAX, "lots")
    with pytest.raises(MscclError, match="MSCCL_PY_CACHE_MAX='lots' is not a size"):
        cache.size_cap()
