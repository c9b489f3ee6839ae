"""Draw a topology to an image with matplotlib (the optional ``plot`` extra).

Layout: each machine in its own dashed box, side by side; GPUs at the file's
``place`` positions, else in one row (up to 8) or two rows; switches as a bar
the GPUs attach to (pairs carried by a switch are not drawn one by one);
NICs as orange diamonds next to their GPUs; the inter-node fabric as one
blue box above the machines. Links are labelled with multiplicity and
bandwidth; a link that would cross another GPU is drawn as an arc.
"""

from __future__ import annotations

import math
from pathlib import Path

from msccl_py.errors import TopologyError
from msccl_py.topologies.topology import Topology

#: machines drawn at most; larger clusters show the first ones and say so
MAX_MACHINES = 8
_SPACING = 1.8
_GPU_COLOR, _SWITCH_COLOR, _NIC_COLOR, _FABRIC_COLOR = "#d9ead3", "#b7b7b7", "#f6b26b", "#cfe2f3"

#: how to get matplotlib, said the same way by every error and page that needs it
PLOT_EXTRA = 'pip install -e ".[plot]"'



def _figure_class():
    """matplotlib's Figure (no pyplot: no global backend or state is touched)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise TopologyError(f"drawing needs matplotlib, which is not installed: "
                            f"{PLOT_EXTRA}") from None
    return Figure


def _local_positions(topo: Topology, ranks: list[int]) -> dict[int, tuple[float, float]]:
    g = topo.graph
    placed = {r: g.nodes[r].get("pos") for r in ranks}
    if all(p is not None for p in placed.values()):
        return {r: (p[0] * _SPACING, p[1] * _SPACING) for r, p in placed.items()}
    count = len(ranks)
    has_switch = any(g.nodes[d].get("node") == g.nodes[ranks[0]].get("node")
                     for d in topo.devices("switch"))
    if _dense(topo, ranks):
        radius = max(1.5, count * _SPACING / (2 * math.pi) * 1.4)
        return {r: (radius * math.sin(2 * math.pi * i / count),
                    radius * math.cos(2 * math.pi * i / count)) for i, r in enumerate(ranks)}
    if count <= 8:
        return {r: (i * _SPACING, 0.0) for i, r in enumerate(ranks)}
    cols = math.ceil(count / 2)
    row_gap = _SPACING * (1.6 if has_switch else 1.0)
    return {r: ((i % cols) * _SPACING, row_gap if i < cols else 0.0) for i, r in enumerate(ranks)}


def _dense(topo: Topology, ranks: list[int]) -> bool:
    """Whether to draw the machine on a circle: a point-to-point mesh with no
    ``place`` positions where most GPU pairs are directly linked."""
    g = topo.graph
    members = set(ranks)
    if any(g.nodes[r].get("pos") is not None for r in ranks):
        return False
    if any(set(g.nodes[d]["gpus"]) & members for d in topo.devices("switch")):
        return False
    pairs = sum(1 for u, v in g.edges if u in members and v in members)
    return len(ranks) >= 4 and pairs >= 0.75 * len(ranks) * (len(ranks) - 1)


def layout(topo: Topology) -> tuple[dict, list[int], dict]:
    """Positions of drawn ranks and devices, the machines drawn, and machine boxes.

    Machines are stacked top to bottom; the fabric is a bar to their right.
    """
    machines = list(range(min(topo.num_machines, MAX_MACHINES)))
    pos: dict = {}
    boxes: dict[int, tuple[float, float, float, float]] = {}
    top = 0.0
    for m in machines:
        ranks = topo.ranks_of_node(m) if topo.num_machines > 1 else list(topo.nodes())
        local = _local_positions(topo, ranks)
        xs = [p[0] for p in local.values()]
        ys = [p[1] for p in local.values()]
        for r, (x, y) in local.items():
            pos[r] = (x - min(xs), y)
        lo_x, hi_x, lo_y, hi_y = 0.0, max(xs) - min(xs), min(ys), max(ys)
        _place_devices(topo, m, ranks, pos, lo_x, hi_x, lo_y, hi_y)
        mine = [d for d in pos if isinstance(d, int) and d in local
                or not isinstance(d, int) and topo.graph.nodes[d].get("node") == m]
        y_hi = max(pos[d][1] for d in mine) + 0.9
        y_lo = min(pos[d][1] for d in mine) - 0.9
        shift = top - y_hi
        for d in mine:
            pos[d] = (pos[d][0], pos[d][1] + shift)
        x_lo = min([lo_x] + [pos[d][0] for d in mine])
        x_hi = max([hi_x] + [pos[d][0] for d in mine])
        boxes[m] = (x_lo - 0.9, y_lo + shift, x_hi + 0.9, top)
        top = y_lo + shift - 1.0
    fabric = topo.devices("fabric")
    if fabric:
        right = max(b[2] for b in boxes.values())
        lo = min(b[1] for b in boxes.values())
        pos[fabric[0]] = (right + 1.6, (lo + 0.0) / 2)
    return pos, machines, boxes


def _place_devices(topo, m, ranks, pos, lo_x, hi_x, lo_y, hi_y) -> None:
    g = topo.graph
    mid_y = (lo_y + hi_y) / 2
    members_of = {d: [r for r in g.nodes[d]["gpus"] if r in pos] for d in topo.devices()
                  if g.nodes[d].get("kind") in ("switch", "nic") and g.nodes[d].get("node", 0) == m}
    switches = [d for d in members_of if g.nodes[d]["kind"] == "switch"]
    for k, dev in enumerate(switches):
        y = mid_y if hi_y > lo_y else lo_y - 1.3
        pos[dev] = ((lo_x + hi_x) / 2, y - k * 0.5)
    taken: dict[tuple[float, float], int] = {}
    circle = _dense(topo, ranks)
    cx = sum(pos[r][0] for r in ranks) / len(ranks)
    cy = sum(pos[r][1] for r in ranks) / len(ranks)
    for dev in (d for d in members_of if g.nodes[d]["kind"] == "nic"):
        members = members_of[dev] or ranks
        x = sum(pos[r][0] for r in members) / len(members)
        if circle:
            y = sum(pos[r][1] for r in members) / len(members)
            norm = math.hypot(x - cx, y - cy) or 1.0
            pos[dev] = (x + 1.2 * (x - cx) / norm, y + 1.2 * (y - cy) / norm)
            continue
        upper = sum(pos[r][1] for r in members) / len(members) >= mid_y
        y = hi_y + 1.1 if upper else lo_y - 1.1
        key = (round(x, 2), y)
        shift = taken.get(key, 0)
        taken[key] = shift + 1
        pos[dev] = (x + 0.9 * shift, y)


def _nic_above(pos, data, y) -> bool:
    members = [pos[r][1] for r in data["gpus"] if r in pos]
    return not members or y >= sum(members) / len(members)


def _label(count, bw, kind, unit) -> str:
    if unit == "links":
        return f"{count:g}"
    if count and count != 1 and kind not in ("link", None):
        return f"{count:g}x {kind}\n{bw:g} GB/s"
    return f"{bw:g} GB/s"


def _near(p, a, b, eps=0.3) -> bool:
    (px, py), (ax, ay), (bx, by) = p, a, b
    dx, dy = bx - ax, by - ay
    length2 = dx * dx + dy * dy
    if length2 == 0:
        return False
    t = max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / length2))
    return math.hypot(ax + t * dx - px, ay + t * dy - py) < eps and 0.02 < t < 0.98


def draw(topo: Topology, out: str | Path) -> Path:
    """Write a picture of ``topo`` to ``out`` (format from the suffix, e.g. .png, .svg).

    >>> from msccl_py.topologies import load
    >>> draw(load("dgx1"), "/tmp/dgx1.png").name  # doctest: +SKIP
    'dgx1.png'
    """
    figure = _figure_class()
    from matplotlib.patches import FancyBboxPatch, Rectangle
    pos, machines, boxes = layout(topo)
    g = topo.graph
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    width, height = max(xs) - min(xs) + 3, max(ys) - min(ys) + 3
    scale = min(1.0, 26 / width)
    fig = figure(figsize=(max(6.0, width * scale), max(4.0, height * scale + 0.8)))
    ax = fig.add_subplot()
    ax.set_aspect("equal")
    ax.axis("off")
    for m, (x1, y1, x2, y2) in boxes.items():
        ax.add_patch(Rectangle((x1, y1), x2 - x1, y2 - y1, fill=False, ls="--", lw=0.8,
                               ec="#888888"))
        if topo.num_machines > 1:
            ax.text(x1, y2 + 0.08, f"node {m}: {topo.machine}", fontsize=8, va="bottom",
                    color="#555555")
    ranks = [r for r in pos if isinstance(r, int)]
    max_count = max([float(d.get("count") or 1) for u, v, d in g.edges(data=True)
                     if isinstance(u, int) and isinstance(v, int)] or [1.0])
    centres = {}
    for m in machines:
        mine = [pos[r] for r in ranks if g.nodes[r].get("node", 0) == m]
        centres[m] = (sum(p[0] for p in mine) / len(mine), sum(p[1] for p in mine) / len(mine))
    dense = {m for m in machines
             if _dense(topo, [r for r in ranks if g.nodes[r].get("node", 0) == m])}
    drawn = set()
    texts: dict[int, set] = {m: set() for m in machines}
    for u, v, data in g.edges(data=True):
        if isinstance(u, int) and isinstance(v, int) and u in pos and v in pos \
                and not data.get("via"):
            texts[g.nodes[u].get("node", 0)].add(
                _label(data.get("count"), data["bw"], data.get("kind"), topo.bandwidth_unit))
    for m, seen in texts.items():
        if len(seen) == 1 and m in dense:
            x1, y1, x2, _ = boxes[m]
            ax.text((x1 + x2) / 2, y1 + 0.1, "every link: " + next(iter(seen)).replace("\n", " = ")
                    + (" per direction" if topo.bandwidth_unit == "GB/s" else ""),
                    ha="center", va="bottom", fontsize=8, color="#38761d")
    for u, v, data in g.edges(data=True):
        if not (isinstance(u, int) and isinstance(v, int)) or u not in pos or v not in pos:
            continue
        if data.get("via") or (v, u) in drawn:
            continue
        drawn.add((u, v))
        back = g.edges[v, u] if g.has_edge(v, u) else None
        text = _label(data.get("count"), data["bw"], data.get("kind"), topo.bandwidth_unit)
        if back is not None and back["bw"] != data["bw"]:
            text = f"{u}→{v}: {text}\n{v}→{u}: " + _label(back.get("count"), back["bw"],
                                                          back.get("kind"), topo.bandwidth_unit)
        elif back is None:
            text = f"{u}→{v} only: {text}"
        a, b = pos[u], pos[v]
        machine = g.nodes[u].get("node", 0)
        centre = centres[machine]
        rad = 0.0
        if any(_near(pos[r], a, b) for r in ranks if r not in (u, v)):
            rad = 0.3
            bulge = ((b[1] - a[1]) * rad, -(b[0] - a[0]) * rad)
            mid = ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)
            if bulge[0] * (mid[0] - centre[0]) + bulge[1] * (mid[1] - centre[1]) < 0:
                rad = -rad
        lw = 0.8 + 3.2 * float(data.get("count") or 1) / max_count
        color = "#38761d" if data.get("kind") not in ("pcie", "link") else "#666666"
        ax.annotate("", xy=b, xytext=a, arrowprops=dict(
            arrowstyle="-" if back is not None else "-|>", lw=lw, color=color,
            shrinkA=14, shrinkB=14, connectionstyle=f"arc3,rad={rad}"))
        if len(texts[machine]) == 1 and machine in dense and back is not None \
                and back["bw"] == data["bw"]:
            text = ""
        t = 0.3 if machine in dense else 0.5
        lx = a[0] + t * (b[0] - a[0]) + rad * (b[1] - a[1]) / 2
        ly = a[1] + t * (b[1] - a[1]) - rad * (b[0] - a[0]) / 2
        if text:
            ax.text(lx, ly, text, fontsize=6, ha="center", va="center",
                    bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.85))
    for dev in (d for d in pos if not isinstance(d, int)):
        data = g.nodes[dev]
        x, y = pos[dev]
        kind = data.get("kind")
        if kind == "switch":
            members = [r for r in data["gpus"] if r in pos]
            left = min(pos[r][0] for r in members) - 0.5
            right = max(pos[r][0] for r in members) + 0.5
            for r in members:
                rx, ry = pos[r]
                ax.plot([rx, rx], [ry, y], color="#7f7f7f", lw=1.2, zorder=1)
            ax.add_patch(FancyBboxPatch((left, y - 0.22), right - left, 0.44,
                                        boxstyle="round,pad=0.05", fc=_SWITCH_COLOR,
                                        ec="#444444", zorder=3))
            port = data.get("port_bw")
            text = dev.split("@")[0]
            if port:
                text += (f": every GPU {data['count']:g}x {data['link']} = {port:g} GB/s "
                         f"per direction" if topo.bandwidth_unit == "GB/s"
                         else f": {data['count']:g} links per GPU")
            ax.text((left + right) / 2, y, text, ha="center", va="center", fontsize=7, zorder=4)
        elif kind == "nic":
            for r in data["gpus"]:
                if r in pos:
                    ax.plot([pos[r][0], x], [pos[r][1], y], color=_NIC_COLOR, lw=1.0, zorder=1)
            ax.scatter([x], [y], marker="D", s=260, c=_NIC_COLOR, edgecolors="#994d00", zorder=3)
            bw = f"\n{data['bw'] * 8:g} Gb/s" if data.get("bw") else ""
            above = _nic_above(pos, data, y)
            ax.text(x + 0.22, y + (0.18 if above else -0.18), dev.split("@")[0] + bw,
                    ha="left", va="bottom" if above else "top", fontsize=6, zorder=4)
            fabric = topo.devices("fabric")
            if fabric and fabric[0] in pos:
                bus = y + (0.75 if _nic_above(pos, data, y) else -0.75)
                ax.plot([x, x, pos[fabric[0]][0]], [y, bus, bus], color="#6fa8dc", lw=0.8,
                        zorder=0)
        elif kind == "fabric":
            lo = min(b[1] for b in boxes.values())
            hi = max(b[3] for b in boxes.values())
            ax.add_patch(FancyBboxPatch((x - 0.35, lo), 0.7, hi - lo, boxstyle="round,pad=0.1",
                                        fc=_FABRIC_COLOR, ec="#3d85c6", zorder=3))
            ax.text(x, (lo + hi) / 2, _fabric_label(topo), ha="center", va="center",
                    fontsize=9, rotation=90, zorder=4)
    for r in ranks:
        x, y = pos[r]
        ax.add_patch(FancyBboxPatch((x - 0.42, y - 0.28), 0.84, 0.56, boxstyle="round,pad=0.05",
                                    fc=_GPU_COLOR, ec="#274e13", lw=1.2, zorder=5))
        label = g.nodes[r].get("label", f"GPU{r}")
        if topo.num_machines > 1:
            label = f"{label}\nrank {r}"
        ax.text(x, y, label, ha="center", va="center", fontsize=7, zorder=6)
    title = topo.title
    if topo.num_machines > len(machines):
        title += f"  (showing {len(machines)} of {topo.num_machines} machines)"
    ax.set_title(title, fontsize=10)
    ax.set_xlim(min(xs) - 1.5, max(xs) + 1.5)
    ax.set_ylim(min(ys) - 1.2, max(ys) + 1.5)
    out = Path(out)
    try:
        fig.savefig(out, dpi=150, bbox_inches="tight")
    except (OSError, ValueError) as exc:
        raise TopologyError(f"cannot write picture {out}: {exc}") from None
    return out


def _fabric_label(topo) -> str:
    """The network bar's label: its wiring where the cluster gives a fabric."""
    from msccl_py.topologies.fabric import of
    fab = of(topo)
    if fab is None or fab.spec.kind == "flat":
        return "inter-node network"
    rows = dict(fab.describe())
    return f"{rows['fabric']}\n{rows['oversubscription'].split(';')[0]}"
