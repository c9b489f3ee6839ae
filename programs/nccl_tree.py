"""NCCL's tree allreduce, built from a machine's topology the way NCCL builds it.

Inside a node the tree is a chain in ring order (the first rank of the chain
is the node's head); across nodes the heads form a binary tree, mirrored on
odd channels so the two trees of a channel pair put different nodes at the
leaves (NCCL's double binary tree). Each channel reduces its share of the
buffer up the chains and the tree to the root, then broadcasts it back down.
Channel orders come from the same ring search as ``nccl_ring``; NCCL has the
tree for allreduce only. Without ``topology`` the machine is a fully
connected one of ``num_ranks`` GPUs.

    python programs/nccl_tree.py 16 --topology ndv5 --nodes 2 --protocol LL128
"""

from msccl_py.library.prelude import *
from msccl_py.topologies.rings import MAX_RINGS, program_rings


def node_tree(nodes: int, mirrored: bool) -> dict[int, int]:
    """Parent of each non-root node in a balanced binary tree (heap layout).

    >>> node_tree(4, False), node_tree(4, True)
    ({1: 0, 2: 0, 3: 1}, {2: 3, 1: 3, 0: 2})
    """
    name = (lambda i: nodes - 1 - i) if mirrored else (lambda i: i)
    return {name(i): name((i - 1) // 2) for i in range(1, nodes)}


def _chains(topo, ring: list[int]) -> list[list[int]]:
    """The ring's ranks, node by node, in ring order."""
    count = getattr(topo, "num_machines", 1) or 1
    if count <= 1:
        return [list(ring)]
    chains: list[list[int]] = [[] for _ in range(count)]
    for r in ring:  # one pass: a scan per node made this quadratic in ranks
        chains[topo.node_of(r)].append(r)
    return chains


@library_program(
    "allreduce", "NCCL tree: chains inside nodes, double binary tree across",
    max_instances=4, protocols=("Simple", "LL128", "LL"), chunking="trees",
    params=(Param("topology", str, None, "machine file or name the trees are built on"),
            Param("nodes", int, None, "copies of the machine (a cluster)", low=1),
            Param("trees", int, None, "trees (channels); default: as many as NCCL's rings",
                  low=1, high=MAX_RINGS)))
def nccl_tree(num_ranks, topology=None, nodes=None, trees=None):
    """NCCL tree allreduce (returns the finished MSCCLProgram).

    >>> nccl_tree(4, trees=2).check()
    True
    """
    topo, order = program_rings(num_ranks, topology, nodes, trees)
    count = len(order)
    with program(AllReduce(num_ranks, count, True), topo, f"nccl_tree_{count}t"):
        for c, ring in enumerate(order):
            chains = _chains(topo, ring)
            parent = node_tree(len(chains), mirrored=c % 2 == 1)
            # deepest nodes first, so a head reduces its subtree before passing it on
            depth = {m: 0 for m in range(len(chains))}
            for m in sorted(parent, key=lambda m: -m if c % 2 else m):
                depth[m] = depth[parent[m]] + 1
            up = sorted(range(len(chains)), key=lambda m: -depth[m])
            children: dict[int, list[int]] = {}
            for k, p in parent.items():
                children.setdefault(p, []).append(k)
            for m in up:
                chain = chains[m]
                for src, dst in zip(chain[:0:-1], chain[-2::-1]):
                    chunk(dst, Buffer.input, c).reduce(chunk(src, Buffer.input, c), ch=c)
                if m in parent:
                    head = chains[parent[m]][0]
                    chunk(head, Buffer.input, c).reduce(chunk(chain[0], Buffer.input, c), ch=c)
            for m in reversed(up):
                chain = chains[m]
                for child in children.get(m, ()):
                    chunk(chain[0], Buffer.input, c).copy(chains[child][0], Buffer.input, c,
                                                          ch=c)
                for src, dst in zip(chain, chain[1:]):
                    chunk(src, Buffer.input, c).copy(dst, Buffer.input, c, ch=c)


if __name__ == "__main__":
    sys.exit(nccl_tree.main())
