"""Find and load topology files by name or path.

Search order for a name (``load("dgx-h100")`` looks for ``dgx-h100.topo``):

1. directories in ``$MSCCL_PY_TOPOLOGY_PATH`` (``os.pathsep``-separated);
2. the repository's ``topologies/`` folder, next to the ``msccl_py`` package
   (source checkouts and editable installs);
3. ``msccl_py/topologies/files/``, the copy shipped as package data (a link
   to ``topologies/`` in the repository, materialised by the wheel build), so
   a non-editable install finds the same files.
"""

from __future__ import annotations

import os
from pathlib import Path

from msccl_py.errors import TopologyError, did_you_mean
from msccl_py.topologies.topofile import MachineSpec, Spec, Where, decode, parse_text
from msccl_py.topologies.topology import Topology

SUFFIX = ".topo"
_PACKAGE = Path(__file__).resolve().parent
_cache: dict[Path, tuple[float, dict[str, Spec]]] = {}


def clear_cache() -> None:
    """Forget parsed files (they are re-read anyway when their mtime changes)."""
    _cache.clear()


def search_path() -> list[Path]:
    """Directories searched for ``NAME.topo``, first match wins."""
    dirs = [Path(p) for p in os.environ.get("MSCCL_PY_TOPOLOGY_PATH", "").split(os.pathsep) if p]
    dirs += [_PACKAGE.parents[1] / "topologies", _PACKAGE / "files"]
    return [d for d in dirs if d.is_dir()]


def available() -> dict[str, Path]:
    """Every topology name on the search path and the file defining it.

    >>> "dgx1" in available()
    True
    """
    found: dict[str, Path] = {}
    for d in search_path():
        for f in sorted(d.glob(f"*{SUFFIX}")):
            found.setdefault(f.stem, f)
    return dict(sorted(found.items()))


def find(name: str) -> Path:
    """The file for topology ``name``, or a TopologyError listing what exists."""
    for d in search_path():
        f = d / f"{name}{SUFFIX}"
        if f.is_file():
            return f
    known = available()
    names = ", ".join(known) or "none"
    raise TopologyError(f"unknown topology '{name}' (not a file, and not on the search path; "
                        f"known: {names}){did_you_mean(name, known)}")


def read_specs(path: Path) -> dict[str, Spec]:
    """Specs defined in one file (cached by modification time)."""
    path = path.resolve()
    try:
        mtime = path.stat().st_mtime
        if path in _cache and _cache[path][0] == mtime:
            return _cache[path][1]
        text = decode(path.read_bytes(), str(path))
    except OSError as exc:
        raise TopologyError(f"cannot read topology file: {exc.strerror}", str(path)) from None
    specs = parse_text(text, str(path), resolve_base=_base_machine)
    _cache[path] = (mtime, specs)
    return specs


def _base_machine(name: str, where: Where) -> MachineSpec:
    try:
        specs = read_specs(find(name))
    except TopologyError as exc:
        raise where.error(f"cannot find machine '{name}': {exc}") from None
    spec = specs.get(name)
    if not isinstance(spec, MachineSpec):
        raise where.error(f"'{name}' is not a machine")
    return spec


def _main_spec(path: Path, specs: dict[str, Spec]) -> Spec:
    if not specs:
        raise TopologyError("topology file defines no machine or cluster", str(path), 1, 1)
    return specs.get(path.stem) or list(specs.values())[-1]


def load(source: str | os.PathLike, nodes: int | None = None, *,
         network_bw: float | None = None, gpus_per_node: int | None = None) -> Topology:
    """Load a topology by name (``"dgx-h100"``) or path, optionally as ``nodes`` copies.

    A file's main entry is the machine or cluster named like the file, else
    its last one. ``nodes`` overrides a cluster's node count; ``network_bw``
    (GB/s) overrides every NIC's bandwidth; ``gpus_per_node`` uses only the
    machine's first GPUs, as a launch of fewer ranks per host does
    (:func:`~msccl_py.topologies.compose.first_gpus`).

    >>> load("dgx-h100", nodes=2).num_nodes()
    16
    >>> load("dgx-h100", nodes=2, gpus_per_node=2).num_nodes()
    4
    """
    path = Path(source)
    if path.suffix == SUFFIX or path.is_file():
        if not path.is_file():
            raise TopologyError(f"no such topology file: {path}")
    else:
        path = find(str(source))
    specs = read_specs(path)
    spec = _main_spec(path, specs)
    return build_spec(spec, specs, nodes, network_bw, str(path), gpus_per_node)


def build_spec(spec: Spec, specs: dict[str, Spec], nodes: int | None,
               network_bw: float | None, source: str, gpus_per_node: int | None = None
               ) -> Topology:
    """Topology for a parsed machine or cluster spec (``gpus_per_node``: see :func:`load`)."""
    from msccl_py.topologies.compose import build, first_gpus
    if nodes is not None and (not isinstance(nodes, int) or nodes < 1):
        raise TopologyError(f"nodes must be a positive integer, got {nodes!r}")
    if isinstance(spec, MachineSpec):
        count = nodes or 1
        if gpus_per_node is not None:
            spec, _ = first_gpus(spec, gpus_per_node)
        return build(spec, count, network_bw=network_bw, source=source)
    machine = specs.get(spec.machine)
    if machine is None:
        machine = _base_machine(spec.machine, spec.where)
    if not isinstance(machine, MachineSpec):
        raise spec.where.error(f"cluster '{spec.name}' uses '{spec.machine}', "
                               f"which is not a machine")
    count = nodes or spec.nodes or 1
    name = spec.name if nodes in (None, spec.nodes) else f"{machine.name}x{count}"
    nics = spec.nics
    if gpus_per_node is not None and gpus_per_node != machine.gpus:
        machine, nics = first_gpus(machine, gpus_per_node, nics, spec.where)
        name = f"{machine.name}x{count}"
    return build(machine, count, name=name, nics=nics,
                 network_bw=network_bw if network_bw is not None else spec.network_bw,
                 network_latency=spec.network_latency, title=spec.title,
                 source=source, where=spec.where, network_kind=spec.network_kind,
                 fabric=spec.fabric)


def loads(text: str, nodes: int | None = None, *, file: str | None = None) -> Topology:
    """Load a topology from file text (the last machine or cluster in it).

    >>> loads("machine m { gpus 2 linktype l 25 GB/s link 0 -> 1 l x2 }").links
    [[0, 0], [2, 0]]
    """
    specs = parse_text(text, file, resolve_base=_base_machine)
    if not specs:
        raise TopologyError("topology text defines no machine or cluster", file or "<text>", 1, 1)
    return build_spec(list(specs.values())[-1], specs, nodes, None, file or "<text>")


def resolve(topo: "Topology | str | os.PathLike") -> Topology:
    """Accept a Topology, a topology name or a file path; return a Topology.

    >>> resolve("dgx1").name
    'dgx1'
    """
    if isinstance(topo, Topology):
        return topo
    if isinstance(topo, (str, os.PathLike)):
        return load(topo)
    raise TopologyError(f"expected a Topology, a topology name or a path, "
                        f"got {type(topo).__name__}")
