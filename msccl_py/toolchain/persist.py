"""The IR as JSON data, for stores that keep compiled programs (the library's cache).

Plain JSON (no code runs on loading, unlike a pickle), exact (reading gives
back the IR that was written, not what an XML round trip makes of it) and
linear in the program's size. A text this module did not write, or one in
another version of the format, raises :class:`~msccl_py.errors.MscclError`.

>>> alg = ir.Algorithm("a", "allreduce", "Simple", True, 1, 1, 1, [ir.Gpu(0, 1, 1, 0, [
...     ir.Threadblock(0, steps=[ir.Step("copy", ir.Loc("i", 0), ir.Loc("o", 0))])])])
>>> algorithm_from_json(algorithm_to_json(alg)) == alg
True
"""

from __future__ import annotations

import json

from msccl_py import ir
from msccl_py.errors import MscclError

#: bumped whenever the layout below changes
FORMAT = 1
_HEADER = ("name", "collective", "protocol", "inplace", "ngpus", "nchunksperloop", "nchannels",
           "outofplace", "min_bytes", "max_bytes", "root")


def algorithm_to_json(alg: ir.Algorithm) -> str:
    """``alg`` as one line of JSON: a header, then per GPU its threadblocks' steps as arrays."""
    gpus = []
    for gpu in alg.gpus:
        tbs = []
        for tb in gpu.threadblocks:
            steps = []
            for st in tb.steps:
                src, dst = st.src, st.dst
                steps.append([st.op, None if src is None else src.buffer,
                              None if src is None else src.offset,
                              None if dst is None else dst.buffer,
                              None if dst is None else dst.offset,
                              st.count, [x for dep in st.depends for x in dep],
                              int(st.has_dependents)])
            tbs.append([tb.id, tb.send_peer, tb.recv_peer, tb.channel, steps])
        gpus.append([gpu.rank, gpu.input_chunks, gpu.output_chunks, gpu.scratch_chunks, tbs])
    head = {name: getattr(alg, name) for name in _HEADER}
    return json.dumps({"format": FORMAT, **head, "gpus": gpus}, separators=(",", ":"))


def algorithm_from_json(text: str) -> ir.Algorithm:
    """The IR :func:`algorithm_to_json` wrote."""
    try:
        data = json.loads(text)
        if data.get("format") != FORMAT:
            raise MscclError(f"stored IR is in format {data.get('format')!r}, not {FORMAT}")
        Step, Loc = ir.Step, ir.Loc
        locs: dict = {}

        def loc(buf, off):
            if buf is None:
                return None
            key = (buf, off)
            found = locs.get(key)
            if found is None:
                found = locs[key] = Loc(buf, off)
            return found

        gpus = []
        for rank, i_chunks, o_chunks, s_chunks, tbs in data["gpus"]:
            threadblocks = []
            for tb_id, send, recv, chan, steps in tbs:
                threadblocks.append(ir.Threadblock(tb_id, send, recv, chan, [
                    Step(op, loc(sb, so), loc(db, do), count,
                         [(deps[k], deps[k + 1]) for k in range(0, len(deps), 2)], bool(hd))
                    for op, sb, so, db, do, count, deps, hd in steps]))
            gpus.append(ir.Gpu(rank, i_chunks, o_chunks, s_chunks, threadblocks))
        return ir.Algorithm(**{name: data[name] for name in _HEADER}, gpus=gpus)
    except MscclError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MscclError(f"not an IR this version stored: {type(exc).__name__}: {exc}") from None
