"""NCCL's example tuner plugin's CSV: NCCL's own algorithms, the fastest the model predicts.

NCCL (from 2.27) ships an example tuner plugin (``plugins/tuner/example/``,
loaded with ``NCCL_TUNER_PLUGIN``) that reads rules from the CSV file
``NCCL_TUNER_CONFIG_FILE`` names, one per line, ``#`` starting a comment::

    collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps,regBuff]

(collectives ``broadcast``, ``reduce``, ``allgather``, ``reducescatter``,
``allreduce``; algorithms ``tree``, ``ring``, ``collnet_direct``,
``collnet_chain``, ``nvls``, ``nvls_tree``, ``pat``; protocols ``ll``,
``ll128``, ``simple``; ``-1`` for channels keeps NCCL's count, for nNodes /
nRanks matches any; a call of ``nBytes`` with ``min_bytes <= nBytes <=
max_bytes`` takes the first matching rule; ``max_bytes`` is read with
``strtoull``, so ``-1`` is the largest size). Facts from NVIDIA/nccl commit
5067397c ``plugins/tuner/example/plugin.c`` and ``nccl_tuner.conf``.

:func:`tuner_rules` picks, at every sample size, the (algorithm, protocol)
of NCCL's own that ``simulate nccl`` predicts fastest (each run as if
``NCCL_ALGO``/``NCCL_PROTO`` forced it, at NCCL's channel count for it), and
merges neighbouring samples into ranges that tile 0 to the largest size.
Where that differs from what NCCL's own model picks, :class:`Rule` keeps
both times, so the report can say by how much.

>>> rules = tuner_rules("dgx-h100", "allreduce", sizes="1KiB,1GiB")
>>> [(r.algorithm, r.protocol) for r in rules], rules[0].lo, rules[-1].hi
([('ring', 'll'), ('nvls', 'simple')], 0, None)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msccl_py.errors import MscclError
from msccl_py.simulate.results import parse_sizes
from msccl_py.tuning import nccl_model as nm
from msccl_py.tuning.nccl_sim import _resolve, candidate_times

#: our collective names -> the plugin's
PLUGIN_COLLECTIVES = {"allreduce": "allreduce", "allgather": "allgather",
                      "reduce_scatter": "reducescatter", "broadcast": "broadcast",
                      "reduce": "reduce"}
#: NCCL's algorithm names (tuning model) -> the plugin's
PLUGIN_ALGORITHMS = {"Tree": "tree", "Ring": "ring", "CollNetDirect": "collnet_direct",
                     "CollNetChain": "collnet_chain", "NVLS": "nvls", "NVLSTree": "nvls_tree",
                     "PAT": "pat"}
#: the plugin's fields, in order (the first 8 are required)
FIELDS = ("collective", "min_bytes", "max_bytes", "algorithm", "protocol", "channels",
          "nNodes", "nRanks", "numPipeOps", "regBuff")


@dataclass(frozen=True)
class Rule:
    """One CSV line: sizes ``lo``..``hi`` (inclusive; ``hi`` None: no bound) run with
    ``algorithm``/``protocol``; per sample inside it (bytes, predicted µs of the rule's
    choice, NCCL's own choice as ``algo/proto``, its predicted µs)."""

    collective: str
    lo: int
    hi: int | None
    algorithm: str
    protocol: str
    nodes: int
    ranks: int
    samples: tuple[tuple[int, float, str, float], ...]

    def line(self) -> str:
        """The CSV line (channels ``-1``: NCCL's own count for the size)."""
        return ",".join(str(v) for v in (
            PLUGIN_COLLECTIVES[self.collective], self.lo, -1 if self.hi is None else self.hi,
            self.algorithm, self.protocol, -1, self.nodes, self.ranks))


def tuner_rules(topology: Any, collective: str, *, nodes: int = 1,
                sizes: Any = "1:4GiB", machine: Any = None) -> list[Rule]:
    """The plugin's rules for ``collective`` on ``topology`` (``nodes`` copies): per sample
    the fastest of NCCL's own (algorithm, protocol) as predicted, ranges tiling 0 to
    unbounded (each sample's choice holds from it up to the next sample)."""
    if collective not in PLUGIN_COLLECTIVES:
        raise MscclError(f"NCCL's tuner plugin tunes {', '.join(PLUGIN_COLLECTIVES)}, not "
                         f"{collective!r} (send/receive is not tuned)")
    topo = _resolve(topology, nodes)
    from msccl_py.tuning.rccl import amd_arch
    if amd_arch(topo) is not None:
        raise MscclError(f"'{topo.name}' runs RCCL, whose tuner plugins are not NCCL's example "
                         f"plugin; --nccl-tuner-conf is for NVIDIA machines")
    samples = sorted(set(parse_sizes(sizes)))
    picks = []
    for s in samples:
        times = candidate_times(topo, collective, s, machine=machine)
        best = min(times, key=lambda k: times[k][0])
        own = nm.choose(topo, collective, s)
        own_key = (own.algorithm, own.protocol)
        picks.append((s, best, times[best][0], f"{own.algorithm}/{own.protocol}",
                      times[own_key][0] if own_key in times else float("nan")))
    rules: list[Rule] = []
    n = topo.num_nodes()
    for k, (s, best, t, own, own_t) in enumerate(picks):
        hi = picks[k + 1][0] - 1 if k + 1 < len(picks) else None
        algo, proto = PLUGIN_ALGORITHMS[best[0]], best[1].lower()
        if rules and (rules[-1].algorithm, rules[-1].protocol) == (algo, proto):
            last = rules[-1]
            rules[-1] = Rule(collective, last.lo, hi, algo, proto, last.nodes, last.ranks,
                             last.samples + ((s, t, own, own_t),))
        else:
            rules.append(Rule(collective, 0 if not rules else s, hi, algo, proto,
                              nm.nodes_of(topo), n, ((s, t, own, own_t),)))
    return rules


def differences(rules: list[Rule]) -> list[str]:
    """Where the rules differ from NCCL's own choice, and by how much (NCCL's predicted
    time over the rule's)."""
    from msccl_py.plan.sizes import format_size
    out = []
    for r in rules:
        for s, t, own, own_t in r.samples:
            mine = f"{r.algorithm}/{r.protocol}"
            if own.lower().replace("nvlstree", "nvls_tree") != mine:
                out.append(f"at {format_size(s)}: {mine} ({t:.1f} us) where NCCL picks {own} "
                           f"({own_t:.1f} us): {own_t / t:.2f}x")
    return out


def write_conf(path: str | Path, rules: list[Rule], title: str) -> None:
    """Write the plugin's CSV: a comment header, then one line per rule."""
    head = [f"# {title}", "# Format: " + ",".join(FIELDS[:8]),
            "# read by NCCL's example tuner plugin: NCCL_TUNER_PLUGIN=<its .so> "
            "NCCL_TUNER_CONFIG_FILE=<this file>"]
    try:
        Path(path).write_text("\n".join(head + [r.line() for r in rules]) + "\n")
    except OSError as exc:
        raise MscclError(f"cannot write {path}: {exc.strerror}") from None
