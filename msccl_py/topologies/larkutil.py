"""Shared lark plumbing: lazy parser construction and one-line syntax errors.

lark is imported only when a file is parsed, so ``import msccl_py.topologies``
works on machines without it (the GPU box).
"""

from __future__ import annotations

import functools
from pathlib import Path

from msccl_py.errors import TopologyError, did_you_mean

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
        hint = _misspelt_keyword(lark, text, getattr(exc.token, "start_pos", None))
        raise TopologyError(f"unexpected {got}; expected {_describe(lark, exc.expected)}{hint}",
                            where, exc.line if exc.line != -1 else _last_line(text),
                            exc.column if exc.column != -1 else 1) from None
    except UnexpectedCharacters as exc:
        char = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else ""
        allowed = _describe(lark, exc.allowed) if exc.allowed else "something else"
        hint = _misspelt_keyword(lark, text, exc.pos_in_stream)
        raise TopologyError(f"unexpected character {char!r}; expected {allowed}{hint}",
                            where, exc.line, exc.column) from None
    except UnexpectedEOF as exc:
        raise TopologyError(f"unexpected end of input; expected {_describe(lark, exc.expected)}",
                            where, _last_line(text), 1) from None
    except UnexpectedInput as exc:  # any other lark input error
        raise TopologyError(f"cannot parse: {type(exc).__name__}", where,
                            getattr(exc, "line", 1), getattr(exc, "column", 1)) from None


def _misspelt_keyword(lark, text: str, pos: int | None) -> str:
    """``; did you mean `linktype`?`` when the word around ``pos`` is a keyword misspelt.

    The lexer reads ``linktpye`` as the keyword ``link`` and a name ``tpye``,
    so the whole word around the failing token is what the user wrote.
    """
    if pos is None or not 0 <= pos < len(text):
        return ""
    start = end = pos
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_-"):
        start -= 1
    while end < len(text) and (text[end].isalnum() or text[end] in "_-"):
        end += 1
    word = text[start:end]
    words = keywords(lark)
    if not word or word in words:
        return ""
    return did_you_mean(word, words)


@functools.lru_cache(maxsize=None)
def keywords(lark) -> tuple[str, ...]:
    """The grammar's keywords (its literal words)."""
    return tuple(sorted({t.pattern.value for t in lark.terminals
                         if t.pattern.type == "str" and t.pattern.value.isalpha()
                         and len(t.pattern.value) > 2}))


def _last_line(text: str) -> int:
    return text.count("\n") + 1


def _describe(lark, names) -> str:
    shown = []
    for name in sorted(set(names)):
        try:
            pattern = lark.get_terminal(name).pattern
        except KeyError:
            shown.append(_FRIENDLY.get(name, name))
            continue
        if pattern.type == "str":   # a keyword (lark names "link" LINK, as nvidia-smi's LINK)
            shown.append(repr(pattern.value))
        else:
            shown.append(_FRIENDLY.get(name, name.lower()))
    shown = sorted(set(shown))
    if len(shown) > 14:
        shown = shown[:14] + ["..."]
    return " or ".join(shown) if len(shown) <= 2 else ", ".join(shown)
