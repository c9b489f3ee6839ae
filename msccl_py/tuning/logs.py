"""Reading nccl-tests and rccl-tests output the way people paste it.

Both tools print one row per size: ``size count type [redop] [root]`` then,
out of place and in place, ``time algbw busbw #wrong`` (older versions have
no root column and print ``error`` as ``0e+00``). rccl-tests can also write
``-Z csv``: a header ``collective, gpus, size, type, redop, inplace, time,
algbw, busbw, #wrong`` (``ranks, rankspernode, gpusperrank`` with MPI) and
one row per size and placement. Pasted logs carry launcher prefixes (``0:``
from ``srun -l``, ``[1,0]<stdout>:`` from ``mpirun --tag-output``, ``[0]``
in the middle of lines when ranks interleave) and lose their column
alignment; rows are therefore read by token kind, not by position.

The collective, rank count, GPUs per process (the header's ``nThread 1
nGpus 8``: one thread launching 8 GPUs, nccl-tests' ``-g 8``) and
``NCCL_ALGO``/``NCCL_PROTO`` come from the log when it says them (the test banner, the ``Rank N`` device lines, the
environment echo of ``NCCL_DEBUG=INFO``, a pasted command line); the caller
can fill in what is missing. ``library`` is ``"RCCL"`` for rccl-tests output
(its version banner, ``RCCL version``, or AMD devices on the ``Rank`` lines),
``"NCCL"`` for NVIDIA devices or nccl-tests' version line, else None.

>>> log = parse_text('''
... 0: #       size    count   type  redop  root   time  algbw  busbw #wrong   time  algbw  busbw #wrong
... 0:      1048576   262144  float    sum    -1  21.0  49.93  87.38      0  20.9  50.17  87.80      0
... ''', "pasted.txt")
>>> log.rows[0].size, log.rows[0].time_us, log.nranks
(1048576, 21.0, 8)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from msccl_py.errors import LogError

#: nccl-tests binary stems and CSV names → our collective names
COLLECTIVES = {"all_reduce": "allreduce", "allreduce": "allreduce",
               "all_gather": "allgather", "allgather": "allgather",
               "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter",
               "alltoall": "alltoall", "broadcast": "broadcast", "reduce": "reduce"}

#: out-of-place and in-place times of one size further apart than this share say the run
#: was noisy there (the two run the same algorithm at every size a power of two)
NOISE = 0.10

#: ALGO and PROTO spellings as NCCL accepts them (case-insensitive)
ALGOS = {"ring": "Ring", "tree": "Tree"}
PROTOS = {"simple": "Simple", "ll": "LL", "ll128": "LL128"}

_PREFIX = re.compile(r"^\s*(?:\[\d+(?:,\d+)*\](?:<std\w+>)?:?|\d+\s*:(?!\d))")
_INLINE_TAG = re.compile(r"\[\d+\]")
_HEADER = re.compile(r"\bnGpus(?:\(perProc\))?\s+(\d+)\b")
_RANK_LINE = re.compile(r"\bRank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\b")
_BANNER = re.compile(r"Collective test starting:\s*(\w+?)(?:_perf)?\b")
_COMMAND = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce)_perf")
_ENV = re.compile(r"NCCL_(ALGO|PROTO)(?:\s+set by environment to\s+|\s*=\s*)([\w,^]+)", re.I)
_TYPE = re.compile(r"^[a-z][a-z0-9_]*$")
_RCCL = re.compile(r"rccl-tests|\bRCCL version\b|\bRank\s+\d+\b.*\b(?:AMD|Instinct)\b", re.I)
_NCCL = re.compile(r"nccl-tests version|\bRank\s+\d+\b.*\b(?:NVIDIA|Tesla)\b", re.I)
_REDOPS = {"sum", "prod", "max", "min", "avg", "mulsum", "premulsum", "none"}


@dataclass(frozen=True)
class Row:
    """One size of a log: bytes, and the out-of-place and in-place time (µs) and bandwidths (GB/s)."""

    size: int
    time_us: float
    algbw: float
    busbw: float
    in_place_us: float | None = None
    line: int = 0
    count: int | None = None   # elements, where the log says

    def time_range(self) -> tuple[float, float]:
        """The times this row's call took, as far as the run itself tells: its out-of-place
        time, or, where its in-place time of the same call differs from it by more than
        :data:`NOISE`, both (the run was that noisy there).

        >>> Row(32, 22.25, 0, 0, 13.34).time_range(), Row(64, 14.5, 0, 0, 14.4).time_range()
        ((13.34, 22.25), (14.5, 14.5))
        """
        ip = self.in_place_us
        if ip is None or ip <= 0 or abs(ip - self.time_us) <= NOISE * min(ip, self.time_us):
            return self.time_us, self.time_us
        return min(ip, self.time_us), max(ip, self.time_us)


@dataclass
class Log:
    """A parsed log: where it came from, what it measured and its rows, smallest size first."""

    source: str
    collective: str | None = None
    nranks: int | None = None
    algo: str | None = None
    proto: str | None = None
    rows: list[Row] = field(default_factory=list)
    library: str | None = None
    gpus_per_process: int | None = None   # GPUs one thread launches (nccl-tests -g)

    def timed_rows(self) -> list[Row]:
        """The rows a fit can use: every size above 0 bytes (a 0-byte call moves nothing,
        and its time is a launch alone)."""
        return [r for r in self.rows if r.size > 0]

    def time_ranges(self, runs: list | None = None) -> list[tuple[float, float]]:
        """Per row of :meth:`timed_rows`, the times its call took as far as the log itself
        tells (:meth:`Row.time_range`), widened down where the next size ran the same way
        (``runs``: per row what ran it, e.g. algorithm, protocol and channels; None: nothing
        is compared) and its time is too close: the extra bytes cannot move faster than the
        log's best bandwidth, so a row that took longer than the next one's time less that
        says the run was slow there, not the call.

        >>> log = Log("x", rows=[Row(1 << 20, 20.0, 0, 0), Row(2 << 20, 40.0, 0, 0),
        ...                      Row(4 << 20, 45.0, 0, 0), Row(8 << 20, 100.0, 0, 0)])
        >>> [(round(lo, 2), hi) for lo, hi in log.time_ranges(["ring"] * 4)]
        [(20.0, 20.0), (22.5, 40.0), (45.0, 45.0), (100.0, 100.0)]
        """
        rows = self.timed_rows()
        out = [r.time_range() for r in rows]
        peak = max(r.size / lo for r, (lo, _) in zip(rows, out))     # bytes per µs
        for k, (row, nxt) in enumerate(zip(rows, rows[1:])):
            if runs is None or runs[k] != runs[k + 1]:
                continue
            bound = nxt.time_us - (nxt.size - row.size) / peak
            if bound < out[k][0]:
                out[k] = (max(bound, 0.0), out[k][1])
        return out

    def known_collective(self) -> str:
        """The collective, or a LogError where the log does not say it."""
        if self.collective is None:
            raise LogError("the log does not say its collective (no banner, command line or "
                           "file name); give it with --collective", self.source)
        return self.collective


def bus_factor(collective: str, nranks: int) -> float:
    """busbw / algbw as nccl-tests defines it.

    >>> bus_factor("allreduce", 8), bus_factor("allgather", 4)
    (1.75, 0.75)
    """
    if collective == "allreduce":
        return 2 * (nranks - 1) / nranks
    if collective in ("allgather", "reduce_scatter", "alltoall"):
        return (nranks - 1) / nranks
    return 1.0


def _ranks_from_factor(collective: str | None, factor: float) -> int | None:
    """Invert :func:`bus_factor` (None when the factor says nothing)."""
    if collective == "allreduce" and 0 < factor < 2:
        return round(2 / (2 - factor))
    if collective in ("allgather", "reduce_scatter", "alltoall") and 0 < factor < 1:
        return round(1 / (1 - factor))
    if collective is None and 1 < factor < 2:  # allreduce is the only one above 1
        return round(2 / (2 - factor))
    return None


def _number(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _strip(line: str) -> str:
    while True:
        m = _PREFIX.match(line)
        if not m or not m.group(0).strip():
            return line
        line = line[m.end():]


def _table_row(tokens: list[str], source: str, lineno: int) -> Row | None:
    if len(tokens) < 4 or not (tokens[0].isdigit() and tokens[1].isdigit()):
        return None
    if not _TYPE.match(tokens[2]):
        return None
    rest = tokens[3:]
    if rest and rest[0] in _REDOPS:
        rest = rest[1:]
    values = []
    for token in rest:
        if token == "N/A":
            values.append(0.0)
            continue
        number = _number(token)
        if number is None:
            break  # a timestamp or a comment after the numbers
        values.append(number)
    if len(values) % 4 == 1:
        values = values[1:]  # the root column
    if len(values) < 3:
        raise LogError(f"a result row needs time, algbw and busbw after the type, got "
                       f"{' '.join(tokens[3:])!r}", source, lineno)
    in_place = values[4] if len(values) >= 8 else None
    return Row(int(tokens[0]), values[0], values[1], values[2], in_place, lineno,
               int(tokens[1]))


def _csv_rows(lines: list[tuple[int, str]], header: list[str], log: Log) -> None:
    col = {name: i for i, name in enumerate(header)}
    need = {"size", "time", "algbw", "busbw"}
    missing = need - col.keys()
    if missing:
        raise LogError(f"CSV header lacks {', '.join(sorted(missing))}", log.source, lines[0][0])
    out: dict[int, Row] = {}
    for lineno, line in lines[1:]:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < len(header):
            continue
        try:
            size = int(cells[col["size"]])
            time, algbw, busbw = (float(cells[col[k]]) for k in ("time", "algbw", "busbw"))
        except ValueError:
            raise LogError(f"CSV row has a non-number in size/time/algbw/busbw: {line.strip()!r}",
                           log.source, lineno) from None
        if "collective" in col and log.collective is None:
            name = cells[col["collective"]].lower().replace(" ", "")
            log.collective = COLLECTIVES.get(name, COLLECTIVES.get(name.replace("_", "")))
        for key in ("ranks", "gpus"):
            if key in col and log.nranks is None and cells[col[key]].isdigit():
                log.nranks = int(cells[col[key]])
        in_place = "inplace" in col and cells[col["inplace"]] == "1"
        row = out.get(size)
        if in_place:
            out[size] = replace(row, in_place_us=time) if row else Row(size, time, algbw, busbw,
                                                                       time, lineno)
        elif row is None or row.in_place_us == row.time_us:
            out[size] = Row(size, time, algbw, busbw, row.in_place_us if row else None, lineno)
    log.rows = [out[s] for s in sorted(out)]


def parse_text(text: str, source: str = "<log>") -> Log:
    """Parse one log's text (table or CSV). Raises :class:`LogError` when it has no results."""
    log = Log(source)
    lines = [(i, _strip(raw)) for i, raw in enumerate(text.splitlines(), 1)]
    ranks = set()
    csv_start = None
    for i, (lineno, line) in enumerate(lines):
        if m := _RANK_LINE.search(line):
            ranks.add(int(m.group(1)))
        if log.gpus_per_process is None and (m := _HEADER.search(line)):
            log.gpus_per_process = int(m.group(1))
        if log.library is None and (m := _RCCL.search(line) or _NCCL.search(line)):
            log.library = "RCCL" if m.re is _RCCL else "NCCL"
        if m := _BANNER.search(line) or _COMMAND.search(line):
            log.collective = log.collective or COLLECTIVES.get(m.group(1).lower())
        for m in _ENV.finditer(line):
            value = m.group(2).lower()
            if m.group(1).upper() == "ALGO" and value in ALGOS:
                log.algo = ALGOS[value]
            if m.group(1).upper() == "PROTO" and value in PROTOS:
                log.proto = PROTOS[value]
        if csv_start is None and "," in line and "busbw" in line.lower() and "size" in line.lower():
            csv_start = i
    if ranks:
        log.nranks = max(ranks) + 1
    if csv_start is not None:
        header = [c.strip().lower() for c in lines[csv_start][1].split(",")]
        _csv_rows(lines[csv_start:], header, log)
    else:
        rows = {}
        for lineno, line in lines:
            if line.lstrip().startswith("#"):
                continue
            row = _table_row(_INLINE_TAG.sub(" ", line).split(), source, lineno)
            if row is not None:
                rows.setdefault(row.size, row)  # several ranks may print the same table
        log.rows = [rows[s] for s in sorted(rows)]
    if not log.rows:
        raise LogError("no nccl-tests result rows found (a row is: size count type [redop] "
                       "[root] time algbw busbw ...)", source)
    _infer_ranks(log)
    return log


def _infer_ranks(log: Log) -> None:
    """Rank count from busbw / algbw where no ``Rank`` line gave it (needs the collective
    for factors below 1)."""
    if log.nranks is None:
        big = max(log.rows, key=lambda r: r.algbw)
        if big.algbw > 0:
            log.nranks = _ranks_from_factor(log.collective, big.busbw / big.algbw)


def read_log(path: str | Path) -> Log:
    """Parse the log file at ``path``; the file name may name the collective (``all_reduce_*``)."""
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise LogError(f"cannot read log: {exc.strerror}", str(path)) from None
    log = parse_text(text, str(path))
    if log.collective is None:
        m = re.search(r"(all_?reduce|all_?gather|reduce_?scatter|alltoall)", path.name, re.I)
        if m:
            log.collective = COLLECTIVES[m.group(1).lower()]
            _infer_ranks(log)  # an allgather's factor says the ranks only once it is known
    return log
