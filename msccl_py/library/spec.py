"""What a library program declares about itself: parameters, rank counts, regime.

Each file in ``programs/`` declares its program on the build function
(``@library_program(...)``, :mod:`msccl_py.library.declare`, which makes the
``ProgramSpec``) or defines ``SPEC = ProgramSpec(...)`` next to it, so the
registry, the ``list`` command and ``select`` read one description instead
of guessing from the code.

>>> spec = ProgramSpec("demo", "allreduce", "demo program", build="build",
...                    params=(Param("channels", int, 1, "rings", low=1, high=32),))
>>> spec.resolve(4, {"channels": "2"})
{'channels': 2}
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

from msccl_py.collective_table import NAMES
from msccl_py.errors import ProgramError
from msccl_py.ir import PROTOCOLS

#: operations a program can implement (the communicator's calls plus the alltonext pattern)
OPERATIONS = (*(name for name in NAMES if name != "custom"), "barrier", "alltonext")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Param:
    """One algorithm parameter: type, default (``None`` = chosen from the rank count), range."""

    name: str
    type: type
    default: Any
    help: str = ""
    low: int | None = None
    high: int | None = None
    choices: tuple | None = None

    def convert(self, value: Any, program: str) -> Any:
        """Convert ``value`` (possibly a command-line string) to this parameter's type and check it.

        >>> Param("trees", int, 1, choices=(1, 2)).convert("2", "p")
        2
        """
        if value is None and self.default is None:
            return None
        if isinstance(value, str) and self.type is not str:
            value = self._parse(value, program)
        elif self.type is bool and not isinstance(value, bool):
            raise ProgramError(f"{program}: parameter {self.name} must be true or false, "
                               f"got {value!r}")
        elif self.type is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise ProgramError(f"{program}: parameter {self.name} must be an integer, "
                               f"got {value!r}")
        elif self.type is float and not isinstance(value, (int, float)):
            raise ProgramError(f"{program}: parameter {self.name} must be a number, got {value!r}")
        elif self.type is str and not isinstance(value, str):
            if not isinstance(value, os.PathLike):  # a file name may come as a Path
                raise ProgramError(f"{program}: parameter {self.name} must be text, "
                                   f"got {value!r}")
            value = os.fsdecode(value)
        if self.choices is not None and value not in self.choices:
            raise ProgramError(f"{program}: parameter {self.name} must be one of "
                               f"{', '.join(map(str, self.choices))}, got {value!r}")
        if self.low is not None and value < self.low:
            raise ProgramError(f"{program}: parameter {self.name} must be at least {self.low}, "
                               f"got {value}")
        if self.high is not None and value > self.high:
            raise ProgramError(f"{program}: parameter {self.name} must be at most {self.high}, "
                               f"got {value}")
        return value

    def _parse(self, text: str, program: str) -> Any:
        if self.type is bool:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ProgramError(f"{program}: parameter {self.name} must be true or false, "
                               f"got {text!r}")
        try:
            return self.type(text)
        except ValueError:
            kind = {int: "an integer", float: "a number"}.get(self.type, self.type.__name__)
            raise ProgramError(f"{program}: parameter {self.name} must be {kind}, "
                               f"got {text!r}") from None

    def describe(self) -> str:
        """``name=default`` with the range, for listings."""
        default = "auto" if self.default is None else self.default
        if self.choices is not None:
            bounds = "{" + ",".join(map(str, self.choices)) + "}"
        elif self.low is not None or self.high is not None:
            low = "" if self.low is None else self.low
            high = "" if self.high is None else self.high
            bounds = f"[{low}..{high}]"
        else:
            bounds = ""
        return f"{self.name}={default}{bounds}"


@dataclass(frozen=True)
class ProgramSpec:
    """A library program's declaration.

    ``build`` names the module function ``f(num_ranks, instances=1,
    protocol=..., **params) -> MSCCLProgram``. ``min_bytes``/``max_bytes``
    bound the size of each rank's input (``count`` elements times item
    size) the program is meant for (``max_bytes=None`` = no bound); ``protocols`` are
    the ones it is meant to run with, the first being its default.
    ``rank_check(num_ranks, params)`` returns an error text for rank counts
    the simple ``min_ranks``/``power_of_two`` rules do not capture, and
    ``ranks_note`` describes them in listings (e.g. ``8k``). ``spread`` names
    the integer parameter that deals the program's transfers over more
    channels (fewer steps per threadblock); left unset (default ``None``) the
    library picks the smallest value that fits the target runtime's limits.
    ``chunking`` names the integer parameter that sets how many parts each
    buffer is cut into (rings, trees) when it is not the ``spread`` one; left
    unset, the MSCCL++ emitter may move it (or an unset ``spread``) to the
    nearest value whose chunk count power-of-two message sizes divide.
    ``target_max_ranks`` maps a target to the most ranks the program fits
    there (e.g. one threadblock per peer against RCCL's 64).
    """

    name: str
    operation: str
    description: str
    build: str
    params: tuple[Param, ...] = ()
    min_ranks: int = 2
    max_ranks: int | None = None
    power_of_two: bool = False
    rank_check: Callable[[int, dict], str | None] | None = None
    protocols: tuple[str, ...] = PROTOCOLS
    min_bytes: int = 0
    max_bytes: int | None = None
    hierarchical: bool = False
    max_instances: int = 8
    ranks_note: str = ""
    spread: str | None = None
    chunking: str | None = None
    target_max_ranks: tuple[tuple[str, int], ...] = ()
    source: str = field(default="", compare=False)

    def __post_init__(self):
        if self.operation not in OPERATIONS:
            raise ProgramError(f"program {self.name}: unknown operation {self.operation!r}")
        bad = [p for p in self.protocols if p not in PROTOCOLS]
        if bad or not self.protocols:
            raise ProgramError(f"program {self.name}: bad protocols {self.protocols!r}")

    @property
    def protocol(self) -> str:
        """The protocol the program is compiled with unless told otherwise."""
        return self.protocols[0]

    @property
    def ranks_text(self) -> str:
        """Human description of the supported rank counts."""
        text = self.ranks_note or ("2^k" if self.power_of_two else "any")
        text += f" >= {self.min_ranks}"
        if self.max_ranks is not None:
            text += f" <= {self.max_ranks}"
        for target, most in self.target_max_ranks:
            text += f" ({target} <= {most})"
        return text

    @property
    def size_text(self) -> str:
        """Human description of the message-size range."""
        high = "inf" if self.max_bytes is None else _bytes(self.max_bytes)
        return f"{_bytes(self.min_bytes)}-{high}"

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.params) or "none"
        raise ProgramError(f"program {self.name} has no parameter {name!r} (parameters: {known})")

    def resolve(self, num_ranks: int, params: dict[str, Any],
                target: str | None = None) -> dict[str, Any]:
        """All parameters with defaults filled in and values checked; the rank count checked too
        (against ``target``'s declared limit when given).

        >>> ProgramSpec("x", "allgather", "", "b", power_of_two=True).resolve(6, {})
        Traceback (most recent call last):
        ...
        msccl_py.errors.ProgramError: program x needs a power-of-two rank count, got 6
        """
        values = {}
        for key in params:
            self.param(key)
        for p in self.params:
            values[p.name] = p.convert(params[p.name], self.name) if p.name in params else p.default
        reason = self.unsupported(num_ranks, values, target)
        if reason:
            raise ProgramError(reason)
        return values

    def unsupported(self, num_ranks: int, values: dict[str, Any],
                    target: str | None = None) -> str | None:
        """Why ``num_ranks`` (with resolved ``values``) is not supported (on ``target``), or None."""
        if isinstance(num_ranks, bool) or not isinstance(num_ranks, int):
            return f"program {self.name}: rank count must be an integer, got {num_ranks!r}"
        if num_ranks < self.min_ranks:
            return f"program {self.name} needs at least {self.min_ranks} ranks, got {num_ranks}"
        if self.max_ranks is not None and num_ranks > self.max_ranks:
            return f"program {self.name} supports at most {self.max_ranks} ranks, got {num_ranks}"
        if self.power_of_two and num_ranks & (num_ranks - 1):
            return f"program {self.name} needs a power-of-two rank count, got {num_ranks}"
        if self.rank_check is not None:
            reason = self.rank_check(num_ranks, values)
            if reason:
                return f"program {self.name}: {reason}"
        most = dict(self.target_max_ranks).get(target)
        if most is not None and num_ranks > most:
            return (f"program {self.name} fits target {target} up to {most} ranks, got "
                    f"{num_ranks}; choose another --target or program")
        return None

    def supports(self, num_ranks: int, target: str | None = None, **params: Any) -> bool:
        """True when the program accepts ``num_ranks`` with ``params`` (on ``target``).

        >>> ProgramSpec("x", "allgather", "", "b", power_of_two=True).supports(8)
        True
        """
        try:
            self.resolve(num_ranks, params, target)
        except ProgramError:
            return False
        return True

    def covers(self, nbytes: int) -> bool:
        """True when a call of ``nbytes`` per rank is in the program's intended size range."""
        return nbytes >= self.min_bytes and (self.max_bytes is None or nbytes <= self.max_bytes)


def _bytes(n: int) -> str:
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def divides_into_nodes(num_ranks: int, values: dict) -> str | None:
    """Rank check of hierarchical programs: ``gpus_per_node``, when given, divides the ranks.

    >>> divides_into_nodes(8, {"gpus_per_node": 3})
    '8 ranks do not split into nodes of 3 GPUs'
    """
    g = values.get("gpus_per_node")
    if g is not None and num_ranks % g:
        return f"{num_ranks} ranks do not split into nodes of {g} GPUs"
    return None


def default_split(num_ranks: int, gpus_per_node: int | None = None) -> tuple[int, int]:
    """(nodes, gpus per node) for a hierarchical program; the default keeps nodes few and wide.

    With ``gpus_per_node`` unset: 8 GPUs per node when that leaves at least two
    nodes, else the fewest nodes (at least two) of two or more GPUs each, else
    one GPU per node (8 ranks → 2 × 4, 16 → 2 × 8, 6 → 2 × 3, 5 → 5 × 1).

    >>> default_split(8), default_split(16), default_split(32), default_split(6, 3)
    ((2, 4), (2, 8), (4, 8), (2, 3))
    """
    if gpus_per_node is not None:
        if gpus_per_node < 1 or num_ranks % gpus_per_node:
            raise ProgramError(f"{num_ranks} ranks do not split into nodes of {gpus_per_node} GPUs")
        return num_ranks // gpus_per_node, gpus_per_node
    if num_ranks >= 16 and num_ranks % 8 == 0:
        return num_ranks // 8, 8
    for nodes in range(2, num_ranks + 1):
        if num_ranks % nodes == 0 and num_ranks // nodes >= 2:
            return nodes, num_ranks // nodes
    if num_ranks >= 1:
        return num_ranks, 1
    raise ProgramError(f"{num_ranks} ranks cannot form a hierarchy")
