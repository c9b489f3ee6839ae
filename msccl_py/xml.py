"""The lowered IR to and from MSCCL XML, the format the MSCCL runtimes load.

The runtimes tokenize the file line by line rather than parse XML, so the
writer emits text directly in the one layout they accept (one element per
line, two-space indentation, double quotes, no declaration). The reader uses
lxml so that every error can name its line.

Dependencies: the runtimes hold one dependency per XML step, so a step with
``k > 1`` dependencies is written as ``k - 1`` ``nop`` steps, each carrying
one, followed by the step carrying the last (:func:`msccl_py.ir.xml_step_index`
fixes that layout). Dependency targets are written as XML ``s`` indices.
``write_xml(..., dependence_nop=True)`` first applies msccl-tools' hoisting of
reduction dependencies (:func:`hoist_reduce_dependencies`).

Limits per runtime live in :mod:`msccl_py.xml_dialects` (re-exported here).

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
import os
import re
from pathlib import Path

from lxml import etree

from msccl_py import ir
from msccl_py.errors import XmlError
from msccl_py.xml_dialects import (DEFAULT_TARGET, DIALECTS, MAX_COUNT, Dialect, _where,
                                   check_limits, default_target, fused_reductions, get_dialect,
                                   xml_step_count)

__all__ = ["read_xml", "write_xml", "summary", "check_limits", "get_dialect", "Dialect",
           "DIALECTS", "MAX_BYTES_UNBOUNDED", "s_to_ir_index", "xml_step_count",
           "fused_reductions", "hoist_reduce_dependencies", "DEFAULT_TARGET", "default_target"]

#: ``maxBytes`` written for an unbounded algorithm (IR ``max_bytes == 0``): 1 TiB. The
#: oldest runtime reads ``maxBytes="0"`` as "select for 0-byte calls only", so an
#: explicit bound is written; the reader maps any ``maxBytes`` at or above it back to 0.
MAX_BYTES_UNBOUNDED = 1 << 40

#: accepted ``coll`` spellings -> IR collective (both reduce-scatter spellings)
_COLLS = {name: name for name in ir.COLLECTIVES}
_COLLS["reducescatter"] = "reduce_scatter"

_NOP_TAIL = '" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="'
_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\n": "&#10;",
            "\r": "&#13;", "\t": "&#9;"}
_NEEDS_ESCAPE = re.compile(r'[&<>"\n\r\t]')
_BAD_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


# --------------------------------------------------------------------------- writer

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


def _write_gpu(out: list[str], gpu: ir.Gpu) -> None:
    """Append the lines of ``gpu``; every step is validated as it is written."""
    codes = ir.OP_CODES
    buffers = ir.BUFFERS
    tbs = gpu.threadblocks
    nsteps = [len(tb.steps) for tb in tbs]
    # XML index of each step, only for threadblocks with nops (elsewhere it is the IR index)
    s_index: list = [None] * len(tbs)
    for t, tb in enumerate(tbs):
        for step in tb.steps:
            if len(step.depends) > 1:
                s_index[t] = ir.xml_step_index(tb)
                break
    ntb = len(tbs)
    out.append(f'  <gpu id="{gpu.rank}" i_chunks="{gpu.input_chunks}" '
               f'o_chunks="{gpu.output_chunks}" s_chunks="{gpu.scratch_chunks}">')
    for tb in tbs:
        out.append(f'    <tb id="{tb.id}" send="{tb.send_peer}" recv="{tb.recv_peer}" '
                   f'chan="{tb.channel}">')
        s = 0
        for k, step in enumerate(tb.steps):
            code = codes.get(step.op)
            if code is None:
                raise XmlError(f"{_where(gpu, tb)} step {k}: unknown op {step.op!r}; use one "
                               f"of {', '.join(codes)}")
            src, dst = step.src, step.dst
            if src is None:
                sb, so = "i", -1
            else:
                sb, so = src.buffer, src.offset
                if sb not in buffers or so.__class__ is not int or so < 0:
                    so = _offset(_where(gpu, tb), k, "src", src)
            if dst is None:
                db, do = "o", -1
            else:
                db, do = dst.buffer, dst.offset
                if db not in buffers or do.__class__ is not int or do < 0:
                    do = _offset(_where(gpu, tb), k, "dst", dst)
            count = step.count
            if count.__class__ is not int:
                count = _integer(count, f"{_where(gpu, tb)} step {k}: count")
            deps = step.depends
            if deps:
                last = len(deps) - 1
                for j, dep in enumerate(deps):
                    try:
                        t, i = dep
                        ok = 0 <= t < ntb and 0 <= i < nsteps[t]
                    except (TypeError, ValueError):
                        raise XmlError(f"{_where(gpu, tb)} step {k}: dependency {dep!r} is not "
                                       f"a (threadblock, step) pair") from None
                    if not ok:
                        raise XmlError(f"{_where(gpu, tb)} step {k} depends on step {i} of "
                                       f"threadblock {t}, which gpu {gpu.rank} does not have")
                    si = s_index[t]
                    if j < last:
                        out.append(f'      <step s="{s}{_NOP_TAIL}{t}" '
                                   f'deps="{i if si is None else si[i]}" hasdep="0"/>')
                        s += 1
                si = s_index[t]
                depid, depstep = t, (i if si is None else si[i])
            else:
                depid = depstep = -1
            out.append(f'      <step s="{s}" type="{code}" srcbuf="{sb}" srcoff="{so}" '
                       f'dstbuf="{db}" dstoff="{do}" cnt="{count}" depid="{depid}" '
                       f'deps="{depstep}" hasdep="{1 if step.has_dependents else 0}"/>')
            s += 1
        out.append("    </tb>")
    out.append("  </gpu>")


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
           + (f' root="{alg.root}">' if alg.root is not None else '>')]
    for gpu in alg.gpus:
        _write_gpu(out, gpu)
    out.append("</algo>\n")
    return "\n".join(out)


# --------------------------------------------------------------------------- reader

_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_PARSER_OPTS = dict(resolve_entities=False, no_network=True, load_dtd=False,
                    remove_comments=True, remove_pis=True, huge_tree=False)


class _Ctx:
    """Where the reader is, for error messages."""

    def __init__(self, file: str | None):
        self.file = file

    def error(self, el, message: str) -> XmlError:
        line = getattr(el, "sourceline", None)
        return XmlError(message, line=line, file=self.file)

    def get_int(self, el, attrs: dict, name: str) -> int:
        value = attrs.get(name)
        if value is None:
            raise self.error(el, f"<{el.tag}> is missing attribute {name!r}")
        try:
            n = int(value)
        except ValueError:
            n = None
        if n is None or (str(n) != value and not _INT_RE.match(value)):
            raise self.error(el, f"<{el.tag}> attribute {name}={value!r} is not an integer")
        return n

    def get_str(self, el, attrs: dict, name: str) -> str:
        value = attrs.get(name)
        if value is None:
            raise self.error(el, f"<{el.tag}> is missing attribute {name!r}")
        return value


def _load(source: str | bytes | os.PathLike, file: str | None) -> tuple[bytes, str | None]:
    if isinstance(source, bytes):
        return source, file
    if isinstance(source, str):
        stripped = source.lstrip()
        if not stripped:
            raise XmlError("empty input: expected XML text or a path", file=file)
        if stripped.startswith("<"):
            try:
                return source.encode("utf-8"), file
            except UnicodeEncodeError as exc:
                raise XmlError(f"XML text holds a character UTF-8 cannot encode at offset "
                               f"{exc.start}", file=file) from None
    if not isinstance(source, (str, os.PathLike)):
        raise XmlError(f"read_xml needs XML text or a path, got {type(source).__name__}")
    path = Path(source)
    name = file if file is not None else str(path)
    try:
        return path.read_bytes(), name
    except OSError as exc:
        raise XmlError(f"cannot read XML file: {exc.strerror or exc}", file=name) from None


def _parse(data: bytes, ctx: _Ctx):
    if not data.strip():
        raise XmlError("empty input: expected an <algo> element", file=ctx.file)
    doctype = data.find(b"<!DOCTYPE")
    if doctype >= 0:
        # the runtimes' tokenizer knows no DTD; refusing it also rules out entity bombs
        raise XmlError("<!DOCTYPE> is not allowed in MSCCL XML", file=ctx.file,
                       line=data.count(b"\n", 0, doctype) + 1)
    try:
        root = etree.fromstring(data, etree.XMLParser(**_PARSER_OPTS))
    except etree.XMLSyntaxError as exc:
        msg = exc.msg or str(exc)
        # lxml appends its own "(line N)" to messages; the line goes in front instead
        msg = re.sub(r",? ?\(<string>, line \d+\)$|, line \d+, column \d+$", "", msg)
        raise XmlError(f"not well-formed XML: {msg}", line=exc.lineno or None,
                       file=ctx.file) from None
    except ValueError as exc:
        raise XmlError(f"cannot parse XML: {exc}", file=ctx.file) from None
    if root is None:
        raise XmlError("no <algo> element found", file=ctx.file)
    if root.tag != "algo":
        raise ctx.error(root, f"root element is <{root.tag}>; expected <algo>")
    return root


def _elements(parent, tag: str) -> list:
    return [el for el in parent if el.tag == tag]


_STEP_INTS = ("s", "srcoff", "dstoff", "cnt", "depid", "deps", "hasdep")
_DIGITS = re.compile(r"[0-9+-]*\Z")


def _step_fields(ctx: _Ctx, el) -> tuple:
    """``(s, srcoff, dstoff, cnt, depid, deps, hasdep, type, srcbuf, dstbuf)`` of a step.

    The fast path converts all integers at once; any failure reruns the
    attribute-by-attribute checks, which raise the precise error.
    """
    get = el.get
    texts = [get(name) for name in _STEP_INTS]
    kind, srcbuf, dstbuf = get("type"), get("srcbuf"), get("dstbuf")
    try:
        values = [int(t) for t in texts]
        ok = _DIGITS.match("".join(texts)) is not None
    except (TypeError, ValueError):
        ok = False
    if ok and kind is not None and srcbuf is not None and dstbuf is not None:
        values += (kind, srcbuf, dstbuf)
        return tuple(values)
    attrs = dict(el.items())
    ints = [ctx.get_int(el, attrs, name) for name in _STEP_INTS]
    return (*ints, ctx.get_str(el, attrs, "type"), ctx.get_str(el, attrs, "srcbuf"),
            ctx.get_str(el, attrs, "dstbuf"))


def _loc(ctx: _Ctx, el, buf: str, off: int, which: str, cache: dict) -> ir.Loc | None:
    loc = cache.get((buf, off))
    if loc is not None:
        return loc
    if buf not in ir.BUFFERS:
        raise ctx.error(el, f"<step> {which}buf={buf!r} is not a buffer; use i, o or s")
    if off == -1:
        return None
    if off < 0:
        raise ctx.error(el, f"<step> {which}off={off} is negative (only -1, unknown, is allowed)")
    loc = cache[(buf, off)] = ir.Loc(buf, off)
    return loc


def _read_tb(ctx: _Ctx, tb_el, tb: ir.Threadblock, raw: list, to_ir: list, locs: dict) -> None:
    """Fill ``tb.steps``; ``raw[k]`` gets step k's (tb, s, element) deps, ``to_ir`` maps s -> IR."""
    codes = ir.CODE_OPS
    steps = tb.steps
    pending: list = []        # (depid, deps, element) of nops awaiting their real step
    nops_waiting = 0
    for pos, el in enumerate(_elements(tb_el, "step")):
        s, srcoff, dstoff, count, depid, deps, hasdep, kind, srcbuf, dstbuf = _step_fields(ctx, el)
        if s != pos:
            raise ctx.error(el, f"<step> s={s} but it is step {pos} of threadblock {tb.id}; "
                                f"s must equal the position")
        src = _loc(ctx, el, srcbuf, srcoff, "src", locs)
        dst = _loc(ctx, el, dstbuf, dstoff, "dst", locs)
        if hasdep != 0 and hasdep != 1:
            raise ctx.error(el, f"<step> hasdep={hasdep}; must be 0 or 1")
        if depid < -1:
            raise ctx.error(el, f"<step> depid={depid}; must be -1 or a threadblock id")
        op = codes.get(kind)
        if op is None:
            if kind != "nop":
                raise ctx.error(el, f"<step> has unknown type {kind!r}; use one of "
                                    f"{', '.join(list(codes) + ['nop'])}")
            if depid < 0:
                raise ctx.error(el, "<step> type nop has depid=-1; a nop exists only to carry "
                                    "one dependency")
            pending.append((depid, deps, el))
            nops_waiting += 1
            to_ir.append(None)
            continue
        if not 0 <= count < MAX_COUNT:
            raise ctx.error(el, f"<step> cnt={count} is out of range; need 0 <= cnt < {MAX_COUNT}")
        k = len(steps)
        if depid >= 0:
            pending.append((depid, deps, el))
        elif pending:
            raise ctx.error(el, f"<step> follows {len(pending)} nop(s) but has depid=-1; the "
                                f"runtimes need the step after nops to carry a dependency")
        if nops_waiting:
            for j in range(len(to_ir) - nops_waiting, len(to_ir)):
                to_ir[j] = k
            nops_waiting = 0
        to_ir.append(k)
        if pending:
            raw.append((k, pending))
            pending = []
        steps.append(ir.Step(op, src, dst, count, [], hasdep == 1))


def _read_gpu(ctx: _Ctx, gpu_el, ngpus: int, locs: dict) -> ir.Gpu:
    a = dict(gpu_el.items())
    rank = ctx.get_int(gpu_el, a, "id")
    chunks = [ctx.get_int(gpu_el, a, name) for name in ("i_chunks", "o_chunks", "s_chunks")]
    if not 0 <= rank < ngpus:
        raise ctx.error(gpu_el, f"<gpu> id={rank} is out of range for ngpus={ngpus}")
    for name, n in zip(("i_chunks", "o_chunks", "s_chunks"), chunks):
        if n < 0:
            raise ctx.error(gpu_el, f"<gpu> {name}={n} is negative")
    gpu = ir.Gpu(rank, *chunks)
    by_id: dict[int, tuple] = {}
    for tb_el in _elements(gpu_el, "tb"):
        a = dict(tb_el.items())
        tid = ctx.get_int(tb_el, a, "id")
        send, recv, chan = (ctx.get_int(tb_el, a, n) for n in ("send", "recv", "chan"))
        if tid < 0:
            raise ctx.error(tb_el, f"<tb> id={tid} is negative")
        if tid in by_id:
            raise ctx.error(tb_el, f"<tb> id={tid} repeats threadblock {tid} of gpu {rank} "
                                   f"(line {by_id[tid][1].sourceline})")
        for name, peer in (("send", send), ("recv", recv)):
            if (peer != -1 and not 0 <= peer < ngpus) or peer == rank:
                raise ctx.error(tb_el, f"<tb> {name}={peer} on gpu {rank}; a peer is -1 or "
                                       f"another rank in 0..{ngpus - 1}")
        if chan < 0:
            raise ctx.error(tb_el, f"<tb> chan={chan} is negative")
        tb = ir.Threadblock(tid, send, recv, chan)
        raw: list = []
        to_ir: list = []
        _read_tb(ctx, tb_el, tb, raw, to_ir, locs)
        by_id[tid] = (tb, tb_el, raw, to_ir)
    for expected, tid in enumerate(sorted(by_id)):
        if tid != expected:
            raise ctx.error(by_id[tid][1], f"<tb> id={tid} but gpu {rank} has no threadblock "
                                           f"{expected}; ids must be dense from 0")
    for tid in sorted(by_id):
        tb, _, raw, _ = by_id[tid]
        for k, wanted in raw:
            step = tb.steps[k]
            for dep_tb, dep_s, el in wanted:
                target = by_id.get(dep_tb)
                if target is None:
                    raise ctx.error(el, f"<step> depends on threadblock {dep_tb}, which gpu "
                                        f"{rank} does not have")
                target_map = target[3]
                if not 0 <= dep_s < len(target_map):
                    raise ctx.error(el, f"<step> depends on step {dep_s} of threadblock "
                                        f"{dep_tb}, which has steps 0..{len(target_map) - 1}")
                k = target_map[dep_s]
                if k is None:
                    raise ctx.error(el, f"<step> depends on step {dep_s} of threadblock "
                                        f"{dep_tb}, a trailing nop: no flag is ever published "
                                        f"for it")
                step.depends.append((dep_tb, k))
        gpu.threadblocks.append(tb)
    return gpu


def read_xml(source: str | bytes | os.PathLike, file: str | None = None) -> ir.Algorithm:
    """Read MSCCL XML (text starting with ``<``, or a path) into an :class:`~msccl_py.ir.Algorithm`.

    Accepts the old format (no ``outofplace``/``minBytes``/``maxBytes``: then
    ``outofplace = not inplace`` and the size range is unbounded), both
    reduce-scatter spellings, and ignores unknown attributes and elements.
    ``nop`` steps are folded into the next real step's ``depends`` (in file
    order, the step's own dependency last); a nop's ``hasdep`` and ``cnt`` are
    ignored, as the runtimes ignore them; trailing nops are dropped. A
    dependency on a nop becomes one on the real step the nop precedes: the
    runtimes publish flags only for real steps and compare them with ``>=``,
    so waiting for a nop's ``s`` and for the next real step's ``s`` release
    at the same moment. ``maxBytes`` of 0 or at least
    :data:`MAX_BYTES_UNBOUNDED` reads as 0 (unbounded).

    Structural faults raise :class:`~msccl_py.errors.XmlError` naming the
    element and its line: malformed or truncated XML, a DTD, missing or
    non-integer attributes, unknown step types or buffers, offsets below -1,
    ``cnt`` outside 0..71, ``s`` not equal to the position, duplicate or
    non-dense gpu/threadblock ids, peers that are not -1 or another rank,
    dependencies on a missing threadblock or step (or on a trailing nop, which
    would never be released), a nop without a dependency and a real step after
    nops without one of its own (every runtime refuses that chain).
    Representable but wrong programs (offsets past a buffer, i/o chunk counts
    that do not fit the collective, a send in a threadblock without a send
    peer, two threadblocks on one connection, channels past ``nchannels``,
    runtime limits) are read so that the verifier can report them.

    >>> read_xml("<algo/>")
    Traceback (most recent call last):
    ...
    msccl_py.errors.XmlError: line 1: <algo> is missing attribute 'proto'
    """
    data, file = _load(source, file)
    ctx = _Ctx(file)
    root = _parse(data, ctx)
    a = dict(root.items())
    proto = ctx.get_str(root, a, "proto")
    if proto not in ir.PROTOCOLS:
        raise ctx.error(root, f"<algo> proto={proto!r} is not one of {', '.join(ir.PROTOCOLS)}")
    nchannels, nchunks, ngpus = (ctx.get_int(root, a, n)
                                 for n in ("nchannels", "nchunksperloop", "ngpus"))
    coll = ctx.get_str(root, a, "coll")
    if coll not in _COLLS:
        raise ctx.error(root, f"<algo> coll={coll!r} is not a collective msccl_py knows "
                              f"({', '.join(_COLLS)})")
    inplace = bool(ctx.get_int(root, a, "inplace"))
    outofplace = bool(ctx.get_int(root, a, "outofplace")) if "outofplace" in a else not inplace
    min_bytes = ctx.get_int(root, a, "minBytes") if "minBytes" in a else 0
    max_bytes = ctx.get_int(root, a, "maxBytes") if "maxBytes" in a else 0
    for name, value in (("nchannels", nchannels), ("nchunksperloop", nchunks),
                        ("ngpus", ngpus), ("minBytes", min_bytes), ("maxBytes", max_bytes)):
        if value < 0:
            raise ctx.error(root, f"<algo> {name}={value} is negative")
    if ngpus == 0:
        raise ctx.error(root, "<algo> ngpus=0; an algorithm needs at least one gpu")
    if max_bytes >= MAX_BYTES_UNBOUNDED:
        max_bytes = 0
    if max_bytes and min_bytes > max_bytes:
        raise ctx.error(root, f"<algo> minBytes={min_bytes} exceeds maxBytes={max_bytes}")
    coll_root = _root_attr(ctx, root, a, ngpus, _COLLS[coll])
    gpus: dict[int, ir.Gpu] = {}
    lines: dict[int, int] = {}
    locs: dict = {}   # shared immutable Loc objects
    for gpu_el in _elements(root, "gpu"):
        gpu = _read_gpu(ctx, gpu_el, ngpus, locs)
        if gpu.rank in gpus:
            raise ctx.error(gpu_el, f"<gpu> id={gpu.rank} repeats gpu {gpu.rank} "
                                    f"(line {lines[gpu.rank]})")
        gpus[gpu.rank] = gpu
        lines[gpu.rank] = gpu_el.sourceline
    missing = [r for r in range(ngpus) if r not in gpus]
    if missing:
        more = " ..." if len(missing) > 8 else ""
        raise ctx.error(root, f"<algo> has ngpus={ngpus} but no <gpu> for rank(s) "
                              f"{', '.join(map(str, missing[:8]))}{more}")
    return ir.Algorithm(a.get("name", ""), _COLLS[coll], proto, inplace, ngpus, nchunks,
                        nchannels, [gpus[r] for r in range(ngpus)], outofplace, min_bytes,
                        max_bytes, coll_root)


def _root_attr(ctx: _Ctx, el, attrs: dict, ngpus: int, coll: str) -> int | None:
    """The ``root`` attribute msccl_py writes for rooted collectives (runtimes ignore it)."""
    if "root" not in attrs:
        return None
    value = ctx.get_int(el, attrs, "root")
    if coll not in ir.ROOTED:
        raise ctx.error(el, f"<algo> root={value} given for coll={coll!r}, which has no root")
    if not 0 <= value < ngpus:
        raise ctx.error(el, f"<algo> root={value} is not a rank of the {ngpus}-rank algorithm "
                            f"(0..{ngpus - 1})")
    return value


# --------------------------------------------------------------------------- summary

def summary(alg: ir.Algorithm) -> str:
    """Human-readable overview of ``alg`` for ``msccl-py info``.

    >>> alg = ir.Algorithm("a", "allreduce", "LL", True, 1, 1, 1, gpus=[ir.Gpu(0, 1, 0)])
    >>> print(summary(alg).splitlines()[0])
    a: allreduce, 1 ranks, protocol LL, 1 channels, 1 chunks per loop
    """
    mode = "/".join(m for m, on in (("in-place", alg.inplace), ("out-of-place", alg.outofplace))
                    if on) or "neither in-place nor out-of-place"
    hi = "unbounded" if not alg.max_bytes else f"{alg.max_bytes} B"
    ops: dict[str, int] = {}
    for _, tb in alg.threadblocks():
        for step in tb.steps:
            ops[step.op] = ops.get(step.op, 0) + 1
    lines = [f"{alg.name}: {alg.collective}, {alg.ngpus} ranks, protocol {alg.protocol}, "
             f"{alg.nchannels} channels, {alg.nchunksperloop} chunks per loop",
             f"  {mode}; sizes {alg.min_bytes} B .. {hi}",
             "  ops: " + (", ".join(f"{op} {n}" for op, n in sorted(ops.items())) or "none"),
             "  rank  tbs  steps  xml-steps  max/tb  i_chunks  o_chunks  s_chunks"]
    total_tbs = total_steps = total_xml = 0
    for gpu in alg.gpus:
        steps = sum(len(tb.steps) for tb in gpu.threadblocks)
        xml_steps = [xml_step_count(tb) for tb in gpu.threadblocks]
        total_tbs += len(gpu.threadblocks)
        total_steps += steps
        total_xml += sum(xml_steps)
        lines.append(f"  {gpu.rank:>4}  {len(gpu.threadblocks):>3}  {steps:>5}  "
                     f"{sum(xml_steps):>9}  {max(xml_steps, default=0):>6}  "
                     f"{gpu.input_chunks:>8}  {gpu.output_chunks:>8}  {gpu.scratch_chunks:>8}")
    lines.append(f"  total: {total_tbs} threadblocks, {total_steps} steps, {total_xml} XML steps "
                 f"with nops")
    for name in DIALECTS:
        try:
            check_limits(alg, name)
        except XmlError as exc:
            lines.append(f"  target {name}: exceeds limits: {exc}")
        else:
            lines.append(f"  target {name}: within limits")
    return "\n".join(lines)
