"""Shared lark plumbing: lazy parser construction and one-line syntax errors.

lark is imported only when a file is parsed, so ``import msccl_py.topologies``
works on machines without it (the GPU box).
"""

from __future__ import annotations

import functools
from pathlib import Path

from msccl_py.errors import TopologyError

_FRIENDLY = {
    "NAME": "a name", "NUMBER": "a number", "RANGE": "a rank range like 0-7",
    "STRING": 'a "quoted string"', "BWUNIT": "a bandwidth unit (GB/s, Gb/s, MB/s, Mb/s)",
    "TUNIT": "a time unit (us, ns, ms)", "MULT": "a multiplicity like x2",
    "ARROW": "<-> or ->", "ORDER": "dst-src or src-dst", "_NL": "end of line",
    "DEVICE": "a device name like GPU0 or NIC1",
    "LINK": "a link type (X, NV#, PIX, PXB, PHB, NODE, SYS)",
    "AFFINITY": "a CPU/NUMA list like 0-11,24-35", "TEXT": "text", "NICNAME": "a NIC name",
    "LEGEND_KEY": "a legend key", "$END": "end of input",
}


@functools.lru_cache(maxsize=None)
def parser(grammar_file: str):
    """The LALR parser for a grammar shipped next to this module (built once)."""
    try:
        from lark import Lark
    except ImportError:
        raise TopologyError("reading topology files and nvidia-smi output needs lark, which "
                            "is not installed: pip install lark") from None
    grammar = (Path(__file__).parent / grammar_file).read_text()
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=True)


def parse(grammar_file: str, text: str, file: str | None):
    """Parse ``text``; a syntax error becomes a TopologyError with line and column."""
    lark = parser(grammar_file)
    from lark.exceptions import (UnexpectedCharacters, UnexpectedEOF, UnexpectedInput,
                                 UnexpectedToken)
    where = file or "<text>"
    try:
        return lark.parse(text)
    except UnexpectedToken as exc:
        got = "end of input" if exc.token.type == "$END" else repr(str(exc.token))
        raise TopologyError(f"unexpected {got}; expected {_describe(lark, exc.expected)}",
                            where, exc.line if exc.line != -1 else _last_line(text),
                            exc.column if exc.column != -1 else 1) from None
    except UnexpectedCharacters as exc:
        char = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else ""
        allowed = _describe(lark, exc.allowed) if exc.allowed else "something else"
        raise TopologyError(f"unexpected character {char!r}; expected {allowed}",
                            where, exc.line, exc.column) from None
    except UnexpectedEOF as exc:
        raise TopologyError(f"unexpected end of input; expected {_describe(lark, exc.expected)}",
                            where, _last_line(text), 1) from None
    except UnexpectedInput as exc:  # any other lark input error
        raise TopologyError(f"cannot parse: {type(exc).__name__}", where,
                            getattr(exc, "line", 1), getattr(exc, "column", 1)) from None


def _last_line(text: str) -> int:
    return text.count("\n") + 1


def _describe(lark, names) -> str:
    shown = []
    for name in sorted(set(names)):
        if name in _FRIENDLY:
            shown.append(_FRIENDLY[name])
            continue
        try:
            pattern = lark.get_terminal(name).pattern
        except KeyError:
            shown.append(name)
            continue
        shown.append(repr(pattern.value) if pattern.type == "str" else name.lower())
    shown = sorted(set(shown))
    if len(shown) > 14:
        shown = shown[:14] + ["..."]
    return " or ".join(shown) if len(shown) <= 2 else ", ".join(shown)
