"""The lowered IR to MSCCL XML, the format the MSCCL runtimes load.

The runtimes tokenize the file line by line rather than parse XML, so the
writer emits text directly in the one layout they accept (one element per
line, two-space indentation, double quotes, no declaration).

Dependencies: the runtimes hold one dependency per XML step, so a step with
``k > 1`` dependencies is written as ``k - 1`` ``nop`` steps, each carrying
one, followed by the step carrying the last (:func:`msccl_py.ir.xml_step_index`
fixes that layout). Dependency targets are written as XML ``s`` indices.
``write_xml(..., dependence_nop=True)`` first applies msccl-tools' hoisting of
reduction dependencies (:func:`hoist_reduce_dependencies`). The target
runtime's limits come from :mod:`msccl_py.targets.msccl.dialects`.

>>> from msccl_py.targets.msccl.read import read_xml
>>> alg = read_xml('''<algo name="x" proto="Simple" nchannels="1" nchunksperloop="2"
...   ngpus="2" coll="allreduce" inplace="1">
...  <gpu id="0" i_chunks="2" o_chunks="0" s_chunks="0"/>
...  <gpu id="1" i_chunks="2" o_chunks="0" s_chunks="0"/>
... </algo>''')
>>> print(write_xml(alg, "msccl").splitlines()[0])
<algo name="x" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allreduce" inplace="1" outofplace="0" minBytes="0" maxBytes="1099511627776">
"""

from __future__ import annotations

import dataclasses
import numbers
import re

from msccl_py import ir
from msccl_py.errors import XmlError
from msccl_py.targets.msccl.dialects import (MAX_BYTES_UNBOUNDED, Dialect, check_limits,
                                             get_dialect, where)

_NOP_TAIL = '" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="'
_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\n": "&#10;",
            "\r": "&#13;", "\t": "&#9;"}
_NEEDS_ESCAPE = re.compile(r'[&<>"\n\r\t]')
_BAD_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def s_to_ir_index(tb: ir.Threadblock) -> list[int]:
    """IR index of the step each XML ``s`` of ``tb`` belongs to; a nop belongs to the next step.

    The inverse view of :func:`msccl_py.ir.xml_step_index`, for tools that
    report or consume XML ``s`` numbers.

    >>> tb = ir.Threadblock(0, steps=[ir.Step("copy"), ir.Step("copy", depends=[(1, 0), (2, 0)])])
    >>> s_to_ir_index(tb)
    [0, 1, 1]
    """
    out: list[int] = []
    for k, step in enumerate(tb.steps):
        out.extend([k] * max(1, len(step.depends)))
    return out


def _attr(value: str) -> str:
    """``value`` escaped for a double-quoted attribute; XML cannot hold other control chars."""
    if _BAD_CHARS.search(value):
        raise XmlError(f"algorithm name {value!r} holds a control character XML cannot carry")
    return _NEEDS_ESCAPE.sub(lambda m: _ESCAPES[m.group()], value) if _NEEDS_ESCAPE.search(
        value) else value


def _check_header(alg: ir.Algorithm) -> None:
    if alg.protocol not in ir.PROTOCOLS:
        raise XmlError(f"algorithm {alg.name!r}: unknown protocol {alg.protocol!r}; use one of "
                       f"{', '.join(ir.PROTOCOLS)}")
    for field in ("ngpus", "nchunksperloop", "nchannels", "min_bytes", "max_bytes"):
        value = getattr(alg, field)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise XmlError(f"algorithm {alg.name!r}: {field} must be a non-negative integer, "
                           f"got {value!r}")
    if alg.max_bytes and alg.min_bytes > alg.max_bytes:
        raise XmlError(f"algorithm {alg.name!r}: min_bytes {alg.min_bytes} exceeds max_bytes "
                       f"{alg.max_bytes}")
    if alg.root is not None and (alg.collective not in ir.ROOTED or isinstance(alg.root, bool)
                                 or not isinstance(alg.root, int)
                                 or not 0 <= alg.root < alg.ngpus):
        raise XmlError(f"algorithm {alg.name!r}: root={alg.root!r} must be a rank "
                       f"0..{alg.ngpus - 1} of a rooted collective (collective "
                       f"{alg.collective!r})")
    if len(alg.gpus) != alg.ngpus:
        raise XmlError(f"algorithm {alg.name!r} has {len(alg.gpus)} gpus but ngpus={alg.ngpus}")
    for k, gpu in enumerate(alg.gpus):
        if gpu.rank != k:
            raise XmlError(f"gpu at position {k} has rank {gpu.rank}; gpus must be listed by "
                           f"rank 0..{alg.ngpus - 1}")
        for name in ("input_chunks", "output_chunks", "scratch_chunks"):
            if _integer(getattr(gpu, name), f"gpu {k} {name}") < 0:
                raise XmlError(f"gpu {k} {name} is negative: {getattr(gpu, name)}")
        for t, tb in enumerate(gpu.threadblocks):
            if tb.id != t:
                raise XmlError(f"gpu {k}: threadblock at position {t} has id {tb.id}; ids must "
                               f"be 0..{len(gpu.threadblocks) - 1} in order")
            if tb.channel.__class__ is not int:  # plain ints skip the costly ABC check
                _integer(tb.channel, f"gpu {k} threadblock {t} channel")
            for name, peer in (("send_peer", tb.send_peer), ("recv_peer", tb.recv_peer)):
                if peer.__class__ is not int:
                    peer = _integer(peer, f"gpu {k} threadblock {t} {name}")
                if (peer != -1 and not 0 <= peer < alg.ngpus) or peer == k:
                    raise XmlError(f"gpu {k} threadblock {t} {name} is {peer}; a peer is -1 or "
                                   f"another rank in 0..{alg.ngpus - 1}")


def _integer(value: object, what: str) -> int:
    """``value`` as an int if it is an integer of any kind (NumPy too), else an XmlError."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    raise XmlError(f"{what} must be an integer, got {value!r}")


def _offset(where: str, k: int, what: str, loc: object) -> int:
    """Slow path for a location that is not a plain ``Loc(buffer, int >= 0)``."""
    buffer = getattr(loc, "buffer", None)
    offset = getattr(loc, "offset", None)
    if (buffer in ir.BUFFERS and isinstance(offset, numbers.Integral)
            and not isinstance(offset, bool) and offset >= 0):
        return int(offset)
    raise XmlError(f"{where} step {k}: {what} {loc!r} is not a Loc with buffer i/o/s and "
                   f"offset >= 0")


def _place(gpu: ir.Gpu, tb: ir.Threadblock, k: int, what: str, loc: ir.Loc | None,
           unset: str) -> tuple[str, int]:
    """``(buffer, offset)`` written for a step's ``what`` location (``unset``, -1 for None)."""
    if loc is None:
        return unset, -1
    buf, off = loc.buffer, loc.offset
    if buf not in ir.BUFFERS or off.__class__ is not int or off < 0:
        off = _offset(where(gpu, tb), k, what, loc)
    return buf, off


def _head(gpu: ir.Gpu, tb: ir.Threadblock, k: int, step: ir.Step) -> str:
    """A step's line from its type to ``depid="``, its fields validated (errors name step ``k``)."""
    code = ir.OP_CODES.get(step.op)
    if code is None:
        raise XmlError(f"{where(gpu, tb)} step {k}: unknown op {step.op!r}; use one "
                       f"of {', '.join(ir.OP_CODES)}")
    sb, so = _place(gpu, tb, k, "src", step.src, "i")
    db, do = _place(gpu, tb, k, "dst", step.dst, "o")
    count = step.count
    if count.__class__ is not int:
        count = _integer(count, f"{where(gpu, tb)} step {k}: count")
    return (f'" type="{code}" srcbuf="{sb}" srcoff="{so}" dstbuf="{db}" dstoff="{do}" '
            f'cnt="{count}" depid="')


def _write_gpu(out: list[str], gpu: ir.Gpu, heads: dict, starts: list[str]) -> None:
    """Append the lines of ``gpu``, each ending in a newline; every step is validated as it is
    written.

    ``heads`` maps ``(op, id(src), id(dst), count, has_dependents)`` to the
    line's text after its ``s`` index, for steps without dependencies (and
    ``(op, id(src), id(dst), count)`` to :func:`_head`): programs name few
    locations many times (the IR interns them), so most lines are one lookup.
    Keys by ``id`` hold while ``alg`` keeps every location alive (one
    ``write_xml`` call); only plain ``int`` counts are cached, so equal keys
    write equal text. A common line goes out as two shared strings, its start
    (``starts[s]``) and that text: no string is built per line.
    """
    tbs = gpu.threadblocks
    nsteps = [len(tb.steps) for tb in tbs]
    # XML index of each step of a threadblock (None: its IR index, it has no nops), found
    # once a dependency on it is written: most programs need none
    s_index: list = [_UNKNOWN] * len(tbs)
    ntb = len(tbs)
    get = heads.get
    append = out.append
    append(f'  <gpu id="{gpu.rank}" i_chunks="{gpu.input_chunks}" '
           f'o_chunks="{gpu.output_chunks}" s_chunks="{gpu.scratch_chunks}">\n')
    for t, tb in enumerate(tbs):
        append(f'    <tb id="{tb.id}" send="{tb.send_peer}" recv="{tb.recv_peer}" '
               f'chan="{tb.channel}">\n')
        n = nsteps[t]
        if len(starts) < n:  # nops push s past the step's index: grown as they come
            starts.extend(f'      <step s="{s}' for s in range(len(starts), n))
        s = 0
        for k, step in enumerate(tb.steps):
            count = step.count
            hd = step.has_dependents
            if hd.__class__ is not bool:
                hd = bool(hd)
            deps = step.depends
            if not deps and count.__class__ is int:  # the common line: one lookup
                key = (step.op, id(step.src), id(step.dst), count, hd)
                tail = get(key)
                if tail is None:
                    tail = heads[key] = (_head(gpu, tb, k, step)
                                         + ('-1" deps="-1" hasdep="1"/>\n' if hd
                                            else '-1" deps="-1" hasdep="0"/>\n'))
                append(starts[s])
                append(tail)
                s += 1
                continue
            if count.__class__ is int:
                key = (step.op, id(step.src), id(step.dst), count)
                head = get(key)
                if head is None:
                    head = heads[key] = _head(gpu, tb, k, step)
            else:
                head = _head(gpu, tb, k, step)
            if deps:
                last = len(deps) - 1
                for j, dep in enumerate(deps):
                    try:
                        d, i = dep
                        ok = 0 <= d < ntb and 0 <= i < nsteps[d]
                    except (TypeError, ValueError):
                        raise XmlError(f"{where(gpu, tb)} step {k}: dependency {dep!r} is not "
                                       f"a (threadblock, step) pair") from None
                    if not ok:
                        raise XmlError(f"{where(gpu, tb)} step {k} depends on step {i} of "
                                       f"threadblock {d}, which gpu {gpu.rank} does not have")
                    si = _xml_index(tbs, s_index, d)
                    if j < last:
                        append(f'      <step s="{s}{_NOP_TAIL}{d}" '
                               f'deps="{i if si is None else si[i]}" hasdep="0"/>\n')
                        s += 1
                depid, depstep = d, (i if si is None else si[i])
                if len(starts) < s + n - k:
                    starts.extend(f'      <step s="{x}' for x in range(len(starts), s + n - k))
            else:
                depid = depstep = -1
            append(f'      <step s="{s}{head}{depid}" deps="{depstep}" '
                   f'hasdep="{1 if hd else 0}"/>\n')
            s += 1
        append("    </tb>\n")
    append("  </gpu>\n")


#: an s_index entry not found yet
_UNKNOWN = object()


def _xml_index(tbs: list, s_index: list, t: int) -> list[int] | None:
    """``s_index[t]``: the XML index of each step of threadblock ``t`` (None: its IR index)."""
    si = s_index[t]
    if si is _UNKNOWN:
        si = None
        for step in tbs[t].steps:
            if len(step.depends) > 1:
                si = ir.xml_step_index(tbs[t])
                break
        s_index[t] = si
    return si


def hoist_reduce_dependencies(alg: ir.Algorithm) -> ir.Algorithm:
    """Copy of ``alg`` where each threadblock's first ``reduce`` waits for all its reductions.

    msccl-tools' ``dependence_nop`` style: the dependencies of every
    ``reduce`` from a threadblock's first one on move to that first one (so
    the writer emits them as nops before it), leaving the later reductions
    free to fuse into one multi-source reduction. The first reduction keeps
    its last own dependency as the one on the step itself; duplicates, and
    waits of later reductions on their own threadblock, are dropped. Waiting earlier never changes results but can create a wait
    cycle, so verify the returned IR. ``alg`` is not modified; applying the
    function twice changes nothing more.

    >>> red = lambda o, deps: ir.Step("reduce", ir.Loc("s", o), ir.Loc("i", 0), depends=deps)
    >>> tb = ir.Threadblock(0, steps=[red(0, [(1, 0)]), red(1, [(2, 0)]), red(2, [(1, 0)])])
    >>> alg = ir.Algorithm("h", "allreduce", "LL", True, 1, 1, 1, [ir.Gpu(0, 1, 0, 3, [tb])])
    >>> [st.depends for st in hoist_reduce_dependencies(alg).gpus[0].threadblocks[0].steps]
    [[(2, 0), (1, 0)], [], []]
    """
    gpus = []
    for gpu in alg.gpus:
        tbs = []
        for tb in gpu.threadblocks:
            steps = [dataclasses.replace(st, depends=list(st.depends)) for st in tb.steps]
            first = next((k for k, st in enumerate(steps) if st.op == "reduce"), None)
            if first is not None:
                own = steps[first].depends
                tail = own[-1:]
                moved = own[:-1]
                for st in steps[first + 1:]:
                    if st.op == "reduce":
                        # a wait on this threadblock is implied by program order where it was,
                        # but hoisted above its target it would never be released
                        moved.extend(d for d in st.depends if d[0] != tb.id)
                        st.depends = []
                seen = set(tail)
                hoisted = [d for d in moved if not (d in seen or seen.add(d))]
                steps[first].depends = hoisted + tail if tail else hoisted[1:] + hoisted[:1]
            tbs.append(dataclasses.replace(tb, steps=steps))
        gpus.append(dataclasses.replace(gpu, threadblocks=tbs))
    return dataclasses.replace(alg, gpus=gpus)


def write_xml(alg: ir.Algorithm, target: str | Dialect = "msccl-executor",
              dependence_nop: bool = False, *, check_limits_first: bool = True) -> str:
    """MSCCL XML text of ``alg`` for runtime ``target`` (``msccl``, ``msccl-executor``, ``rccl``).

    Raises :class:`~msccl_py.errors.LimitError` when ``alg`` exceeds the
    target's limits and :class:`~msccl_py.errors.XmlError` when the IR
    cannot be written (unknown op, bad location, dependency on a missing step).
    Unknown locations (``None``) are written as offset -1 in buffer ``i``
    (source) or ``o`` (destination), as msccl-tools does. ``dependence_nop``
    writes :func:`hoist_reduce_dependencies` of ``alg`` instead (reading the
    text back gives that IR, not ``alg``). ``check_limits_first=False`` skips
    :func:`check_limits` for a caller that has just run it on ``alg``.

    >>> copy = ir.Step("copy", ir.Loc("i", 0), ir.Loc("o", 0))
    >>> alg = ir.Algorithm("copy1", "custom", "Simple", False, 1, 1, 1,
    ...                    gpus=[ir.Gpu(0, 1, 1, threadblocks=[ir.Threadblock(0, steps=[copy])])])
    >>> print(write_xml(alg, "msccl").splitlines()[3].strip()[:55])
    <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o"
    """
    dialect = get_dialect(target)
    if dependence_nop:
        alg = hoist_reduce_dependencies(alg)
    _check_header(alg)
    if check_limits_first or dependence_nop:  # hoisting adds nops: check what is written
        check_limits(alg, dialect)
    max_bytes = alg.max_bytes or MAX_BYTES_UNBOUNDED
    out = [f'<algo name="{_attr(str(alg.name))}" proto="{alg.protocol}" '
           f'nchannels="{alg.nchannels}" nchunksperloop="{alg.nchunksperloop}" '
           f'ngpus="{alg.ngpus}" coll="{dialect.coll_name(alg.collective)}" '
           f'inplace="{int(bool(alg.inplace))}" outofplace="{int(bool(alg.outofplace))}" '
           f'minBytes="{alg.min_bytes}" maxBytes="{max_bytes}"'
           + (f' root="{alg.root}">\n' if alg.root is not None else '>\n')]
    heads: dict = {}
    starts: list[str] = []
    for gpu in alg.gpus:
        _write_gpu(out, gpu, heads, starts)
    out.append("</algo>\n")
    return "".join(out)


