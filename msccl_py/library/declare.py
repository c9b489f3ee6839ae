"""Declaring a library program on its build function.

``@library_program(operation, description, **fields)`` puts the program's
:class:`ProgramSpec` on the function that writes its transfers, and turns
that function into the builder the registry, ``select`` and the command
line call: ``name(num_ranks, instances=1, protocol=<first declared>,
**params)`` returning the finished ``MSCCLProgram``. The function itself
takes the rank count and its parameters; inside it, ``with program(...)``
opens the ``MSCCLProgram`` with the program's name and the instances and
protocol of the request being built.

>>> from msccl_py.language import Buffer, chunk
>>> from msccl_py.language.collectives import AllGather
>>> @library_program("allgather", "every rank sends straight to every rank")
... def allgather_direct(n):
...     with program(AllGather(n, 1, False)):
...         for r in range(n):
...             for peer in range(n):
...                 chunk(r, Buffer.input, 0).copy(peer, Buffer.output, r)
>>> prog = allgather_direct(4, protocol="LL")
>>> prog.name, prog.protocol, prog.check(), allgather_direct.spec.build
('allgather_direct', 'LL', True, 'allgather_direct')
"""

from __future__ import annotations

import inspect
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from msccl_py.errors import ProgramError
from msccl_py.language import MSCCLProgram
from msccl_py.language.call_site import caller
from msccl_py.library import script
from msccl_py.library.spec import ProgramSpec
from msccl_py.topologies import fully_connected


@dataclass
class _Request:
    """The build in progress: what ``program()`` opens its ``MSCCLProgram`` with."""

    name: str
    instances: int
    protocol: str
    program: MSCCLProgram | None = None


#: the request being built, set for the duration of one builder call (nested calls stack)
_building: ContextVar[_Request | None] = ContextVar("msccl_py_library_build", default=None)


def program(collective, topology=None, name: str | None = None, **options: Any) -> MSCCLProgram:
    """The ``MSCCLProgram`` of the library program being built, to use as ``with program(...):``.

    Its name is the program's (or ``name``), its instances and protocol the
    request's; ``topology`` defaults to a fully connected machine of the
    collective's ranks; ``options`` go to ``MSCCLProgram`` (e.g.
    ``threadblock_policy``).
    """
    request = _building.get()
    if request is None:
        raise ProgramError("program() outside a build: it opens the program of a function "
                           "declared with @library_program, while that function runs", *caller())
    if request.program is not None:
        raise ProgramError(f"program {request.name} opens a second program; a build opens "
                           f"one", *caller())
    topo = fully_connected(collective.num_ranks) if topology is None else topology
    request.program = MSCCLProgram(name or request.name, topo, collective, request.instances,
                                   protocol=request.protocol, **options)
    return request.program


def library_program(operation: str, description: str, **fields: Any) -> Callable:
    """Declare the decorated function as library program of its name (see the module doc);
    ``fields`` are :class:`ProgramSpec`'s (``params``, ``min_ranks``, ``protocols``, ...).

    A declared parameter the function does not take, or a function that takes
    ``instances`` or ``protocol`` (the builder keeps them for ``program()``), is an
    error at once.
    """
    def declare(function: Callable) -> Callable:
        name = function.__name__
        spec = ProgramSpec(name, operation, description, build=name,
                           source=function.__code__.co_filename, **fields)
        takes = inspect.signature(function).parameters
        where = function.__code__.co_filename, function.__code__.co_firstlineno
        missing = [p.name for p in spec.params if p.name not in takes]
        if missing:
            raise ProgramError(f"program {name} declares parameter {missing[0]!r}, which "
                               f"{name}() does not take", *where)
        kept = [p for p in ("instances", "protocol") if p in takes]
        if kept:
            raise ProgramError(f"{name}() takes {kept[0]!r}, which its builder keeps for "
                               f"program(); take the rank count and the parameters only", *where)

        def build(num_ranks, instances=1, protocol=spec.protocol, *args, **params):
            request = _Request(name, instances, protocol)
            token = _building.set(request)
            try:
                function(num_ranks, *args, **params)
            finally:
                _building.reset(token)
            if request.program is None:
                raise ProgramError(f"program {name} opened no program (`with program(...)`)",
                                   *where)
            return request.program

        def main(argv: Sequence[str] | None = None) -> int:
            """Build and print the XML for a command line (``sys.exit(name.main())``)."""
            return script.main(spec, build, argv)

        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(build, attr, getattr(function, attr))
        build.spec, build.main = spec, main
        return build
    return declare


def declared(namespace: dict) -> list[ProgramSpec]:
    """The specs of the programs ``namespace`` (a module's) declares itself, in order.

    >>> declared({"__name__": "m"})
    []
    """
    module = namespace.get("__name__")
    return [value.spec for value in namespace.values()
            if isinstance(getattr(value, "spec", None), ProgramSpec)
            and getattr(value, "__module__", None) == module and callable(value)]
