"""MSCCL XML to the lowered IR, with every structural fault named by its line.

The reader uses lxml so that every error can name its line, and accepts what
the runtimes load: the old format without ``outofplace``/``minBytes``/
``maxBytes``, both reduce-scatter spellings, ``nop`` steps (folded into the
next real step's ``depends``). Runtime limits are not checked here: a
program past them is read so that the verifier can report it.

>>> alg = read_xml('''<algo name="x" proto="Simple" nchannels="1" nchunksperloop="2"
...   ngpus="2" coll="allreduce" inplace="1">
...  <gpu id="0" i_chunks="2" o_chunks="0" s_chunks="0"/>
...  <gpu id="1" i_chunks="2" o_chunks="0" s_chunks="0"/>
... </algo>''')
>>> alg.collective, alg.ngpus, alg.max_bytes
('allreduce', 2, 0)
"""

from __future__ import annotations

import gc
import os
import re
from pathlib import Path

from msccl_py import ir
from msccl_py.collective_table import SPELLINGS
from msccl_py.errors import XmlError
from msccl_py.plan.geometry import MAX_COUNT
from msccl_py.targets.msccl.dialects import MAX_BYTES_UNBOUNDED

#: accepted ``coll`` spellings -> IR collective (both reduce-scatter spellings)
_COLLS = SPELLINGS

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
    from lxml import etree   # here, not at the top: the fast scan of most files needs none
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


def _tree_rows(ctx: _Ctx, tb_el, tb: ir.Threadblock, locs: dict):
    """The steps of ``tb_el`` as :func:`_read_tb` takes them, each checked as it comes."""
    for pos, el in enumerate(_elements(tb_el, "step")):
        s, srcoff, dstoff, count, depid, deps, hasdep, kind, srcbuf, dstbuf = _step_fields(ctx, el)
        if s != pos:
            raise ctx.error(el, f"<step> s={s} but it is step {pos} of threadblock {tb.id}; "
                                f"s must equal the position")
        yield (kind, _loc(ctx, el, srcbuf, srcoff, "src", locs),
               _loc(ctx, el, dstbuf, dstoff, "dst", locs), count, depid, deps, hasdep, el)


def _read_tb(ctx: _Ctx, rows, tb: ir.Threadblock, raw: list, to_ir: list) -> None:
    """Fill ``tb.steps`` from ``rows``, each ``(type, src, dst, cnt, depid, deps, hasdep,
    element)``; ``raw[k]`` gets step k's (tb, s, element) deps, ``to_ir`` maps s -> IR."""
    codes = ir.CODE_OPS
    steps = tb.steps
    pending: list = []        # (depid, deps, element) of nops awaiting their real step
    nops_waiting = 0
    for kind, src, dst, count, depid, deps, hasdep, el in rows:
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
    gpu = _new_gpu(ctx, gpu_el, ngpus, *(ctx.get_int(gpu_el, a, name)
                                         for name in ("id", "i_chunks", "o_chunks", "s_chunks")))
    by_id: dict[int, tuple] = {}
    for tb_el in _elements(gpu_el, "tb"):
        a = dict(tb_el.items())
        tb = _new_tb(ctx, tb_el, gpu.rank, ngpus, by_id,
                     *(ctx.get_int(tb_el, a, n) for n in ("id", "send", "recv", "chan")))
        _add_tb(ctx, tb_el, tb, _tree_rows(ctx, tb_el, tb, locs), by_id)
    return _finish_gpu(ctx, gpu, by_id)


def _new_gpu(ctx: _Ctx, gpu_el, ngpus: int, rank: int, *chunks: int) -> ir.Gpu:
    if not 0 <= rank < ngpus:
        raise ctx.error(gpu_el, f"<gpu> id={rank} is out of range for ngpus={ngpus}")
    for name, n in zip(("i_chunks", "o_chunks", "s_chunks"), chunks):
        if n < 0:
            raise ctx.error(gpu_el, f"<gpu> {name}={n} is negative")
    return ir.Gpu(rank, *chunks)


def _new_tb(ctx: _Ctx, tb_el, rank: int, ngpus: int, by_id: dict, tid: int, send: int,
            recv: int, chan: int) -> ir.Threadblock:
    if tid < 0:
        raise ctx.error(tb_el, f"<tb> id={tid} is negative")
    if tid in by_id:
        raise ctx.error(tb_el, f"<tb> id={tid} repeats threadblock {tid} of gpu {rank} "
                               f"(line {getattr(by_id[tid][1], 'sourceline', None)})")
    for name, peer in (("send", send), ("recv", recv)):
        if (peer != -1 and not 0 <= peer < ngpus) or peer == rank:
            raise ctx.error(tb_el, f"<tb> {name}={peer} on gpu {rank}; a peer is -1 or "
                                   f"another rank in 0..{ngpus - 1}")
    if chan < 0:
        raise ctx.error(tb_el, f"<tb> chan={chan} is negative")
    return ir.Threadblock(tid, send, recv, chan)


def _add_tb(ctx: _Ctx, tb_el, tb: ir.Threadblock, rows, by_id: dict) -> None:
    raw: list = []
    to_ir: list = []
    _read_tb(ctx, rows, tb, raw, to_ir)
    by_id[tb.id] = (tb, tb_el, raw, to_ir)


def _finish_gpu(ctx: _Ctx, gpu: ir.Gpu, by_id: dict) -> ir.Gpu:
    """Check the threadblock ids are dense, resolve the dependencies, add the threadblocks."""
    rank = gpu.rank
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


# The fast path: a document in the layout the writer emits (and msccl-tools writes) is
# scanned with one regular expression instead of built as an element tree. It accepts only
# text whose every byte the scan explains (the tags below, whitespace between them), so a
# document it accepts is well formed and means what the tree reader would read; anything
# else, errors included, goes to the tree reader, which says what and where.
_N = r"(-?[1-9][0-9]*|0)"
_TOKENS = re.compile(  # a step as (s, the rest of its attributes), or a tag
    r'[ \t\r\n]*(?:<step s="(0|[1-9][0-9]*)" (type="[a-z]+" srcbuf="[ios]" srcoff="[-0-9]+" '
    r'dstbuf="[ios]" dstoff="[-0-9]+" cnt="[0-9]+" depid="[-0-9]+" deps="[-0-9]+" '
    r'hasdep="[0-9]+)"/>'
    r'|(<tb [^<>]*>|</tb>|<gpu [^<>]*>|</gpu>|</algo>|[^ \t\r\n]))')
_STEP = re.compile(rf'type="([a-z]+)" srcbuf="([ios])" srcoff="{_N}" dstbuf="([ios])" '
                   rf'dstoff="{_N}" cnt="{_N}" depid="{_N}" deps="{_N}" hasdep="{_N}\Z')
_TB = re.compile(rf'<tb id="{_N}" send="{_N}" recv="{_N}" chan="{_N}">\Z')
_GPU = re.compile(rf'<gpu id="{_N}" i_chunks="{_N}" o_chunks="{_N}" s_chunks="{_N}">\Z')
_ATTR = re.compile(rb'([A-Za-z_][-A-Za-z0-9_.]*)="([^"<]*)"')
_PLAIN = rb'[^\x00-\x1f\x7f-\xff&"]'   # printable ASCII but & and "
_PLAIN_ASCII = re.compile(rb'[ \t\r\n]*<algo(?:[ \t\r\n]+' + _PLAIN + rb'+="' + _PLAIN + rb'*")*>')
#: the <algo> start tag, double-quoted attributes only (lxml reads what they mean)
_ALGO = re.compile(rb'[ \t\r\n]*<algo(?:[ \t\r\n]+[A-Za-z_][-A-Za-z0-9_.]*="[^"<]*")*>')


class _Fallback(Exception):
    """The fast scan met something it does not explain: read the tree instead."""


class _ScanCtx(_Ctx):
    def error(self, el, message: str) -> Exception:
        return _Fallback(message)


def _scan(data: bytes, file: str | None) -> ir.Algorithm | None:
    """The algorithm of a writer-layout document, or None to read it as a tree."""
    head = _ALGO.match(data)
    if head is None:
        return None
    try:
        text = data.decode("utf-8")
        return _scan_body(text, head.end(), _header(_ScanCtx(file), _algo_tag(data[:head.end()])))
    except Exception:  # noqa: BLE001 - whatever it is, the tree reader reports it
        return None


class _Tag:
    """The ``<algo>`` start tag as :func:`_header` reads an element: its name and items."""

    tag = "algo"

    def __init__(self, items: list):
        self._items = items

    def items(self) -> list:
        return self._items


def _algo_tag(head: bytes):
    """The ``<algo>`` start tag ``head`` (matched by ``_ALGO``): read here when its every
    byte is printable ASCII without ``&`` and no attribute repeats, so every value means
    its text, else by lxml."""
    items = [(name.decode(), value.decode()) for name, value in _ATTR.findall(head)]
    if _PLAIN_ASCII.fullmatch(head) and len({name for name, _ in items}) == len(items):
        return _Tag(items)
    from lxml import etree
    return etree.fromstring(head + b"</algo>", etree.XMLParser(**_PARSER_OPTS))


def _scan_body(text: str, pos: int, head: ir.Algorithm) -> ir.Algorithm | None:
    ctx = _ScanCtx(None)
    ngpus = head.ngpus
    gpus: dict[int, ir.Gpu] = {}
    locs: dict = {}
    kinds: dict = {}     # a step's attributes after s -> (row, plain): a program repeats few
    positions: list[str] = []
    gpu = tb = rows = by_id = None
    ended = False
    for s, rest, tag in _TOKENS.findall(text, pos):
        if rest:
            if rows is None:
                return None
            kind = kinds.get(rest)
            if kind is None:
                kind = kinds[rest] = _scan_kind(ctx, rest, locs)
            rows.append(kind)
            ss.append(s)
        elif tag == "</tb>" and rows is not None:
            n = len(ss)
            while len(positions) < n:
                positions.append(str(len(positions)))
            if ss != positions[:n]:
                return None
            _scan_tb(ctx, tb, rows, by_id)
            rows = None
        elif tag.startswith("<tb ") and gpu is not None and rows is None:
            m = _TB.match(tag)
            if m is None:
                return None
            tb = _new_tb(ctx, None, gpu.rank, ngpus, by_id, *map(int, m.groups()))
            rows, ss = [], []
        elif tag == "</gpu>" and gpu is not None and rows is None:
            if gpu.rank in gpus:
                return None
            gpus[gpu.rank] = _finish_gpu(ctx, gpu, by_id)
            gpu = None
        elif tag.startswith("<gpu ") and gpu is None and not ended:
            m = _GPU.match(tag)
            if m is None:
                return None
            gpu = _new_gpu(ctx, None, ngpus, *map(int, m.groups()))
            by_id = {}
        elif tag == "</algo>" and gpu is None and not ended:
            ended = True
        else:
            return None
    return _algorithm(ctx, None, head, gpus) if ended else None


def _scan_kind(ctx: _Ctx, rest: str, locs: dict) -> tuple:
    """``(row, plain)`` of a step's attributes after ``s``: the row as :func:`_read_tb`
    takes it and, for a real step without a dependency (most), the arguments of its
    ``ir.Step`` but the empty depends (``None`` otherwise)."""
    m = _STEP.match(rest)
    if m is None:
        raise _Fallback(rest)
    kind, sb, so, db, do, cnt, depid, deps, hasdep = m.groups()
    row = (kind, _loc(ctx, None, sb, int(so), "src", locs),
           _loc(ctx, None, db, int(do), "dst", locs), int(cnt), int(depid), int(deps),
           int(hasdep), None)
    op = ir.CODE_OPS.get(kind)
    plain = None
    if op is not None and row[4] == -1 and row[6] in (0, 1) and 0 <= row[3] < MAX_COUNT:
        plain = (op, row[1], row[2], row[3], row[6] == 1)
    return row, plain


def _scan_tb(ctx: _Ctx, tb: ir.Threadblock, kinds: list, by_id: dict) -> None:
    """:func:`_add_tb` for scanned steps; a threadblock of plain steps alone (no nops, no
    dependencies) is filled directly, with what :func:`_read_tb` would make of it."""
    plains = [plain for _row, plain in kinds]
    if None in plains:
        _add_tb(ctx, None, tb, [row for row, _plain in kinds], by_id)
        return
    step = ir.Step
    tb.steps = [step(op, src, dst, count, [], hd) for op, src, dst, count, hd in plains]
    by_id[tb.id] = (tb, None, [], list(range(len(plains))))


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
    # a few objects per step, all kept: the cyclic GC would only rescan them
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _scan(data, file) or _read_tree(data, file)
    finally:
        if enabled:
            gc.enable()


def _read_tree(data: bytes, file: str | None) -> ir.Algorithm:
    """The lxml tree reader: every document, every error named with its line."""
    ctx = _Ctx(file)
    root = _parse(data, ctx)
    head = _header(ctx, root)
    gpus: dict[int, ir.Gpu] = {}
    lines: dict[int, int] = {}
    locs: dict = {}   # shared immutable Loc objects
    for gpu_el in _elements(root, "gpu"):
        gpu = _read_gpu(ctx, gpu_el, head.ngpus, locs)
        if gpu.rank in gpus:
            raise ctx.error(gpu_el, f"<gpu> id={gpu.rank} repeats gpu {gpu.rank} "
                                    f"(line {lines[gpu.rank]})")
        gpus[gpu.rank] = gpu
        lines[gpu.rank] = gpu_el.sourceline
    return _algorithm(ctx, root, head, gpus)


def _header(ctx: _Ctx, root) -> ir.Algorithm:
    """The ``<algo>`` attributes, checked, as an Algorithm without gpus."""
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
    return ir.Algorithm(a.get("name", ""), _COLLS[coll], proto, inplace, ngpus, nchunks,
                        nchannels, [], outofplace, min_bytes, max_bytes, coll_root)


def _algorithm(ctx: _Ctx, root, head: ir.Algorithm, gpus: dict) -> ir.Algorithm:
    """``head`` with its gpus, once every rank has one."""
    ngpus = head.ngpus
    missing = [r for r in range(ngpus) if r not in gpus]
    if missing:
        more = " ..." if len(missing) > 8 else ""
        raise ctx.error(root, f"<algo> has ngpus={ngpus} but no <gpu> for rank(s) "
                              f"{', '.join(map(str, missing[:8]))}{more}")
    head.gpus = [gpus[r] for r in range(ngpus)]
    return head


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


