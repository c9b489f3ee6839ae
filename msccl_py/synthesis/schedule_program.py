"""A schedule written as a readable MSCCLang program, and that program built.

The program holds the schedule as data (``FLOWS``: one line per lane of a
tree) and a short loop that walks each chunk along its tree, so it reads,
edits and compiles like any program in ``programs/``::

    msccl-py compile allgather_mi250.py -o allgather.xml
    python allgather_mi250.py --protocol LL128

:func:`build` runs the same text in-process and returns its
``MSCCLProgram``; nothing else turns a schedule into an algorithm.
"""

from __future__ import annotations

import textwrap

from msccl_py.errors import MscclError
from msccl_py.synthesis.schedule import Schedule

_CLASS = {"allgather": "AllGather", "reduce_scatter": "ReduceScatter", "allreduce": "AllReduce",
          "alltoall": "AllToAll"}

_WALK = {
    "allgather": '''
        if not inplace:  # each rank's own chunks into its output block
            for root, chunks, channel, _ in FLOWS:
                for j in chunks:
                    chunk(root, Buffer.input, j).copy(root, Buffer.output, root * CHUNKS + j,
                                                      ch=channel)
        for root, chunks, channel, hops in FLOWS:
            for j in chunks:
                block = root * CHUNKS + j
                for src, dst in hops:  # parents first: src already holds the chunk
                    ref = (chunk(src, Buffer.input, j) if src == root
                           else chunk(src, Buffer.output, block))
                    ref.copy(dst, Buffer.output, block, ch=channel)''',
    "reduce_scatter": '''
        for root, chunks, channel, hops in FLOWS:
            for j in chunks:
                block = root * CHUNKS + j
                for src, dst in hops:  # leaves first: dst adds src's partial sum
                    chunk(dst, Buffer.input, block).reduce(chunk(src, Buffer.input, block),
                                                           ch=channel)''',
    "allreduce": '''
        for kind, root, chunks, channel, hops in FLOWS:
            for j in chunks:
                block = root * CHUNKS + j
                for src, dst in hops:
                    if kind == "in":  # reduce toward the block's owner, leaves first
                        chunk(dst, Buffer.input, block).reduce(chunk(src, Buffer.input, block),
                                                               ch=channel)
                    else:             # then the owner's result out to every rank
                        chunk(src, Buffer.input, block).copy(dst, Buffer.input, block,
                                                             ch=channel)''',
}

_WALK["allreduce_gather"] = '''
        for root, chunks, channel, hops in FLOWS:  # every rank's whole buffer to every rank
            for src, dst in hops:
                ref = (chunk(src, Buffer.input, 0, CHUNKS) if src == root
                       else chunk(src, f"from{root}", 0, CHUNKS))
                ref.copy(dst, f"from{root}", 0, ch=channel)
        for rank in range(RANKS):                  # then each rank adds them to its own
            for root in range(RANKS):
                if root != rank:
                    chunk(rank, Buffer.input, 0, CHUNKS).reduce(
                        chunk(rank, f"from{root}", 0, CHUNKS))'''

_WALK["alltoall"] = '''
        for rank in range(RANKS):                  # each rank's own block stays
            chunk(rank, Buffer.input, rank * CHUNKS, CHUNKS).copy(rank, Buffer.output,
                                                                  rank * CHUNKS)
        for src, dst, chunks, channel, hops in FLOWS:
            for j in chunks:
                ref = chunk(src, Buffer.input, dst * CHUNKS + j)
                for _, hop in hops:                # relays hold the chunk in scratch
                    if hop == dst:
                        ref.copy(dst, Buffer.output, src * CHUNKS + j, ch=channel)
                    else:
                        ref = ref.copy(hop, f"via{src}to{dst}", j, ch=channel)'''

_COLLECTIVE_ARGS = {
    "allgather": "AllGather(RANKS, CHUNKS, inplace)",
    "reduce_scatter": "ReduceScatter(RANKS, CHUNKS, True)",
    "allreduce": "AllReduce(RANKS, RANKS * CHUNKS, True)",
    "allreduce_gather": "AllReduce(RANKS, CHUNKS, True)",
    "alltoall": "AllToAll(RANKS, CHUNKS, False)",
}

_FLOW_DOC = {
    "allgather": "(root, chunks of the root's block, channel, hops parent first)",
    "reduce_scatter": "(root, chunks of the root's block, channel, hops leaves first)",
    "allreduce": ('(kind, owner, chunks of the owner\'s block, channel, hops): "in" trees '
                  "reduce toward the owner, leaves first; \"out\" trees carry its result, "
                  "parent first"),
    "allreduce_gather": "(root, chunks, channel, hops parent first): the root's whole buffer",
    "alltoall": "(source, destination, chunks of the pair's block, channel, hops in order)",
}


def program_source(s: Schedule, name: str, topology: str, nodes: int | None,
                   summary: list[str], instances: int = 1) -> str:
    """The program text of schedule ``s`` (``topology`` as ``load`` takes it)."""
    if s.collective not in _CLASS:
        raise MscclError(f"no program template for collective {s.collective!r}")
    form = s.collective + ("_gather" if s.form == "gather" else "")
    flows = []
    for f in s.flows:
        hops = ", ".join(f"({a}, {b})" for a, b in f.arcs())
        chunks = "(" + ", ".join(map(str, f.chunks)) + ("," if len(f.chunks) == 1 else "") + ")"
        lead = f'"{f.tree.kind}", ' if form == "allreduce" else ""
        if form == "alltoall":   # a path from the source: its last rank is the destination
            lead = f"{f.tree.root}, {f.arcs()[-1][1]}, "
            flows.append(f"    ({lead}{chunks}, {f.channel}, ({hops},)),")
            continue
        flows.append(f"    ({lead}{f.tree.root}, {chunks}, {f.channel}, ({hops},)),")
    inplace = ", inplace=False" if s.collective == "allgather" else ""
    call_inplace = ", args.inplace" if s.collective == "allgather" else ""
    inplace_arg = ('    parser.add_argument("--inplace", action="store_true", '
                   'help="input is the rank\'s output block")\n'
                   if s.collective == "allgather" else "")
    doc = "\n".join(summary)
    head = f'''"""{doc}
"""

import argparse

from msccl_py.language import *
from msccl_py.language.collectives import {_CLASS[s.collective]}
from msccl_py.topologies import load

NAME = {name!r}
TOPOLOGY = {topology!r}
NODES = {nodes!r}
RANKS = {s.ranks}
CHUNKS = {s.chunks}  # chunks in each rank's block
PROTOCOL = {s.protocol!r}
INSTANCES = {instances}  # copies of the schedule, each on channels of its own
FUSE = {s.fuse!r}  # a rank forwards a chunk as it arrives (receive and send fused)
ROUTED = {s.routed!r}  # some sends join unlinked ranks over the runtime's routes (no link check)

# one lane of a tree per line: {_FLOW_DOC[form]}
FLOWS = [
'''
    body = f'''
]


def program(protocol=PROTOCOL, instances=INSTANCES{inplace}):
    """The schedule as an MSCCLProgram (not yet written out)."""
    topology = None if ROUTED else load(TOPOLOGY, nodes=NODES)
    with MSCCLProgram(NAME, topology, {_COLLECTIVE_ARGS[form]},
                      instances, protocol=protocol, instr_fusion=FUSE) as prog:{textwrap.dedent(_WALK[form]).replace(chr(10), chr(10) + "        ")}
    return prog


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", default=PROTOCOL, choices=["Simple", "LL", "LL128"])
    parser.add_argument("--instances", type=int, default=INSTANCES)
{inplace_arg}    args = parser.parse_args(argv)
    with program(args.protocol, args.instances{call_inplace}):
        Check()
        XML()


if __name__ == "__main__":
    main()
'''
    return head + "\n".join(flows) + body


def build(text: str, filename: str = "<synthesized program>", **kwargs):
    """Run program ``text`` (not as ``__main__``) and return ``program(**kwargs)``."""
    namespace: dict = {"__name__": "msccl_py_synthesized", "__file__": filename}
    try:
        code = compile(text, filename, "exec")
    except SyntaxError as exc:  # a template bug, never the user's
        raise MscclError(f"{filename}:{exc.lineno}: synthesized program does not parse: "
                         f"{exc.msg}") from None
    exec(code, namespace)
    return namespace["program"](**kwargs)
