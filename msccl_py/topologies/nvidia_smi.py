"""Read ``nvidia-smi topo -m`` output into a Topology.

The grammar (``nvidia_smi.lark``) covers the whole matrix format: GPU and NIC
rows and columns, ``X``/``NV#``/``PIX``/``PXB``/``PHB``/``NODE``/``SYS`` cells,
the CPU affinity, NUMA affinity and GPU NUMA ID columns, the legend and the NIC
legend. GPUs become ranks in order; ``NV#`` pairs become ``#`` NVLinks of
``nvlink_bw`` GB/s each; other GPU pairs become PCIe links of ``pcie_bw``
GB/s (unless ``include_pcie=False``); each NIC is attached to the GPUs
nearest to it. nvidia-smi reports no bandwidths, so both are parameters:
25 GB/s per link per direction holds for NVLink 2, 3 and 4 (V100, A100, H100).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import TYPE_CHECKING

from msccl_py.errors import TopologyError
from msccl_py.topologies import larkutil
from msccl_py.topologies.topology import Topology

if TYPE_CHECKING:
    import networkx as nx

#: PCIe path types, nearest first (nvidia-smi's legend order)
PCIE_PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")
#: most NVLinks any GPU has (H100, H200, B200: 18)
MAX_NVLINKS = 18
#: terminal SGR codes (underline, reset) as pastes keep them: with the ESC byte, with it
#: lost (``[4mGPU0 ... [0m``) or spelled out (``\x1b[``, ``\033[``, ``\e[``, ``^[[``, ``␛[``)
_ANSI = re.compile(r"(?:\x1b|\\x1b|\\033|\\e|\^\[|\u241b|\ufffd)?\[[0-9;]*m")
#: the matrix header: device names then the affinity columns, on one line
_HEADER = re.compile(r"[ \t]*(?:[A-Za-z][A-Za-z0-9_]*\d[ \t]+)*[A-Za-z][A-Za-z0-9_]*\d"
                     r"(?:[ \t]+(?:CPU Affinity|NUMA Affinity|GPU NUMA ID))*[ \t]*\Z")
_LEGEND_LINE = re.compile(r"[ \t]*(?:[A-Z#]+[ \t]*=.*|[A-Za-z][A-Za-z0-9_]*\d:[ \t]*\S+"
                          r"|(?:NIC )?Legend:)[ \t]*\Z")


def read_nvidia_smi(text: str, *, name: str = "nvidia-smi", file: str | None = None,
                    nvlink_bw: float = 25.0, pcie_bw: float = 16.0,
                    include_pcie: bool = True, nic_bw: float | None = None,
                    max_nvlinks: int = MAX_NVLINKS) -> Topology:
    """Topology from ``nvidia-smi topo -m`` text.

    ``nic_bw`` (GB/s), when given, makes each NIC a shared-bandwidth device.
    When every GPU pair shows the same ``NV#`` and a GPU's total exceeds
    ``max_nvlinks`` (no GPU has more physical links), the links are NVSwitch
    ports: the GPUs join one switch device, each limited to ``#`` links' worth.

    >>> t = read_nvidia_smi("  GPU0 GPU1\\nGPU0 X NV4\\nGPU1 NV4 X\\n")
    >>> t.link(0, 1), t.bandwidth(0, 1)
    (4, 100.0)
    """
    where = file or "<nvidia-smi>"
    if "ROCm System Management Interface" in text or "rocm-smi" in text[:2000].lower():
        raise TopologyError("this is rocm-smi output, not `nvidia-smi topo -m`; "
                            "rocm-smi --showtopo gives no bandwidths, describe the machine in a "
                            "topology file instead (see topologies/mi300x.topo)", where, 1, 1)
    clean = _trim(_ANSI.sub("", text).replace("\r\n", "\n"))
    tree = larkutil.parse("nvidia_smi.lark", clean, where)
    matrix = tree.children[0]
    header, rows = matrix.children[0], matrix.children[1:]
    columns = [c.children[0] for c in header.children]
    devices = [str(t) for t in columns if t.type == "DEVICE"]
    extra = [str(t) for t in columns if t.type != "DEVICE"]
    if [t.type for t in columns[:len(devices)]] != ["DEVICE"] * len(devices):
        tok = next(t for t in columns[len(devices):] if t.type == "DEVICE")
        raise TopologyError(f"device column {tok} after the affinity columns", where,
                            tok.line, tok.column)
    cells: dict[str, list] = {}
    info: dict[str, dict[str, str]] = {}
    for i, row in enumerate(rows):
        dev, values = row.children[0], [c.children[0] for c in row.children[1:]]
        if i >= len(devices) or str(dev) != devices[i]:
            want = devices[i] if i < len(devices) else "no more rows"
            raise TopologyError(f"row {dev} where the header says {want}", where,
                                dev.line, dev.column)
        links, rest = values[:len(devices)], values[len(devices):]
        if len(links) < len(devices) or any(v.type != "LINK" for v in links):
            bad = next((v for v in links if v.type != "LINK"), None)
            line, col = (bad.line, bad.column) if bad is not None else (dev.line, dev.column)
            raise TopologyError(f"row {dev} needs {len(devices)} connection cells "
                                f"(X, NV#, PIX, ...)", where, line, col)
        if str(links[i]) != "X":
            raise TopologyError(f"row {dev} must have X in its own column {devices[i]}", where,
                                links[i].line, links[i].column)
        if len(rest) > len(extra):
            raise TopologyError(f"row {dev} has {len(rest) - len(extra)} more cells than the "
                                f"header has columns", where, rest[len(extra)].line,
                                rest[len(extra)].column)
        cells[str(dev)] = links
        info[str(dev)] = {k: str(v) for k, v in zip(extra, rest)}
    if len(rows) != len(devices):
        last = rows[-1].children[0]
        raise TopologyError(f"the header lists {len(devices)} devices but there are "
                            f"{len(rows)} rows", where, last.line, last.column)
    nic_names = {}
    for section in tree.children[1:]:
        if section.children[0].data == "nic_legend":
            for entry in section.children[0].children[1:]:
                nic_names[str(entry.children[0])] = str(entry.children[1])
    return _build(name, where, devices, cells, info, nic_names, nvlink_bw, pcie_bw,
                  include_pcie, nic_bw, max_nvlinks)


def _trim(text: str) -> str:
    """The nvidia-smi output inside a paste: lines before the header (a prompt, a caption
    such as ``NVIDIA Topology:``) and after the legends (from a blank line on) become
    blank, so line numbers in errors stay those of the paste.

    >>> _trim("$ nvidia-smi topo -m\\n  GPU0\\nGPU0 X\\n\\nLegend:\\n  X = Self\\n$ exit\\n")
    '\\n  GPU0\\nGPU0 X\\n\\nLegend:\\n  X = Self\\n\\n'
    """
    lines = text.split("\n")
    start = next((i for i, ln in enumerate(lines[:-1])
                  if _HEADER.match(ln) and lines[i + 1].split()[:1] == ln.split()[:1]), 0)
    legend = next((i for i, ln in enumerate(lines) if i > start
                   and ln.strip() in ("Legend:", "NIC Legend:")), None)
    end = len(lines)
    if legend is not None:  # text after a blank line that is no legend is the paste's
        end = next((i for i in range(legend + 1, len(lines))
                    if lines[i].strip() and not _LEGEND_LINE.match(lines[i])
                    and not lines[i - 1].strip()), len(lines))
    kept = [""] * start + lines[start:end] + [""] * (len(lines) - end)
    out = "\n".join(kept)
    return out if out.endswith("\n") else out + "\n"


def _build(name, where, devices, cells, info, nic_names, nvlink_bw, pcie_bw, include_pcie,
           nic_bw, max_nvlinks) -> Topology:
    gpus = [d for d in devices if re.fullmatch(r"GPU\d+", d)]
    nics = [d for d in devices if d not in gpus]
    rank = {g: r for r, g in enumerate(gpus)}
    col = {d: i for i, d in enumerate(devices)}
    import networkx as nx  # here, not at import: programs that only name a machine skip it
    graph = nx.DiGraph(name=name)
    for g, r in rank.items():
        attrs = info[g]
        graph.add_node(r, kind="gpu", node=0, local=r, label=g,
                       cpu_affinity=attrs.get("CPU Affinity"),
                       numa_affinity=attrs.get("NUMA Affinity"),
                       gpu_numa_id=attrs.get("GPU NUMA ID"))
    any_nvlink = False
    for s in gpus:
        for d in gpus:
            if s == d:
                continue
            tok = cells[s][col[d]]
            value = str(tok)
            if value == "X":
                raise TopologyError(f"X outside the diagonal ({s} to {d})", where,
                                    tok.line, tok.column)
            if value.startswith("NV") and value != "NVB":
                count = int(value[2:])
                any_nvlink = True
                graph.add_edge(rank[s], rank[d], count=count, bw=count * nvlink_bw,
                               kind="nvlink", path=value)
            elif include_pcie:
                graph.add_edge(rank[s], rank[d], count=1, bw=pcie_bw, kind="pcie", path=value)
    _infer_switch(graph, len(gpus), nvlink_bw, max_nvlinks)
    for nic in nics:
        paths = {g: str(cells[nic][col[g]]) for g in gpus}
        nearest = min((PCIE_PATHS.index(p) for p in paths.values() if p in PCIE_PATHS),
                      default=None)
        members = [rank[g] for g, p in paths.items()
                   if nearest is not None and p in PCIE_PATHS and PCIE_PATHS.index(p) == nearest]
        label = nic_names.get(nic, nic)
        graph.add_node(label, kind="nic", node=0, gpus=members, bw=nic_bw, column=nic)
        for r in members:
            graph.add_edge(r, label, kind="attach", path=PCIE_PATHS[nearest])
            graph.add_edge(label, r, kind="attach", path=PCIE_PATHS[nearest])
    unit = nvlink_bw if any_nvlink or not include_pcie else pcie_bw
    return Topology.from_graph(name, graph, unit_bw=unit, title=f"{name} ({len(gpus)} GPUs)",
                               source=where)


def _infer_switch(graph: nx.DiGraph, n: int, nvlink_bw: float, max_nvlinks: int) -> None:
    counts = {d.get("count") for u, v, d in graph.edges(data=True) if d.get("kind") == "nvlink"}
    nv_pairs = sum(1 for *_, k in graph.edges(data="kind") if k == "nvlink")
    if n < 3 or len(counts) != 1 or nv_pairs != n * (n - 1):
        return
    count = counts.pop()
    if count * (n - 1) <= max_nvlinks:
        return
    for *_, data in graph.edges(data=True):
        data["via"] = "nvswitch"
    graph.add_node("nvswitch", kind="switch", node=0, gpus=list(range(n)), count=count,
                   link="nvlink", port_bw=count * nvlink_bw, total_bw=None, inferred=True)
    for r in range(n):
        graph.add_edge(r, "nvswitch", kind="attach")
        graph.add_edge("nvswitch", r, kind="attach")


def nvlink_only(nvidia_smi_topo: str | None = None) -> Topology:
    """NVLink-only topology (MSCCLang's ``nvlink_only``); ``links`` count NVLinks.

    Without text it runs ``nvidia-smi topo -m``.

    >>> nvlink_only("  GPU0 GPU1\\nGPU0 X PHB\\nGPU1 PHB X\\n").links
    [[0, 0], [0, 0]]
    """
    if nvidia_smi_topo is None:
        nvidia_smi_topo = _run_nvidia_smi()
    return read_nvidia_smi(nvidia_smi_topo, name="NVLinkOnly", include_pcie=False)


def _run_nvidia_smi() -> str:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise TopologyError("nvlink_only() without text runs `nvidia-smi topo -m`, but nvidia-smi "
                            "is not on PATH; pass the command's output as text instead")
    try:
        done = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TopologyError(f"cannot run `nvidia-smi topo -m`: {exc}") from None
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()
        raise TopologyError(f"`nvidia-smi topo -m` failed (exit {done.returncode}): "
                            f"{message[0] if message else 'no output'}")
    return done.stdout
