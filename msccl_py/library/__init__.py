"""The algorithm library: program registry, compile cache and per-call selection.

Programs live as MSCCLang scripts in ``programs/``; each declares a
:class:`ProgramSpec`. This package finds them, compiles them by name with an
on-disk cache, and picks one for a collective call.

>>> from msccl_py import library
>>> alg = library.compile("allreduce_ring", num_ranks=8, use_cache=False)
>>> library.select("allgather", 8, 4096).name
'allgather_recursive_doubling'
"""

from msccl_py.library.build import (build_program, compile, compile_xml,  # noqa: A004
                                    parse_param_values)
from msccl_py.library.cache import cache_dir
from msccl_py.library.registry import get, load_errors, names, programs, reload, search_path
from msccl_py.library.choice import Selection, candidates, select
from msccl_py.library.spec import OPERATIONS, Param, ProgramSpec, default_split

__all__ = ["compile", "compile_xml", "build_program", "parse_param_values", "cache_dir", "get",
           "names", "programs", "load_errors", "reload", "search_path", "select", "Selection",
           "candidates", "Param", "ProgramSpec", "OPERATIONS", "default_split"]
