"""The element and attribute names MSCCL XML has, and what each runtime needs to load a file.

The runtimes' parsers read the names they know and skip the rest
(msccl-executor-nccl ``src/misc/msccl/msccl_parser.cc``, ``mscclXmlLoadSub``:
"Ignoring element"), so a misspelt ``maxbytes`` or ``<stpe>`` is not an error
there but a different program: no size bound, or a missing step.
:func:`check_names` reports such names (a close match to a known name is an
error, with a did-you-mean; another unknown name is a note), and
:func:`not_loaded_by` says why a runtime would refuse the file at load:
msccl-executor-nccl and RCCL read ``minBytes``, ``maxBytes``, ``inplace`` and
``outofplace`` of ``<algo>`` with ``mscclXmlGetAttrInt``/``Int64``, which fail
when the attribute is absent (``mscclGetAlgoFromXmlFile``, Azure/msccl-executor-nccl
at 3b40a2a; docs/tuning.md); microsoft/msccl defaults all but ``inplace``.

>>> check_names(b'<algo name="x" maxbytes="1"><gpu id="0"/></algo>')
Traceback (most recent call last):
...
msccl_py.errors.XmlError: line 1: <algo> has unknown attribute 'maxbytes', which no runtime reads; did you mean `maxBytes`?
>>> not_loaded_by({"inplace", "proto"}, "msccl-executor")
'msccl-executor does not load it: <algo> has no minBytes, maxBytes, outofplace (its parser requires them)'
"""

from __future__ import annotations

import re

from msccl_py.errors import XmlError, did_you_mean

#: element -> the attributes some runtime or writer gives it (msccl-tools wrote
#: ``nthreadblocks``/``maxcount``; msccl_py writes ``root`` for rooted collectives)
ATTRIBUTES = {
    "algo": {"name", "proto", "nchannels", "nchunksperloop", "ngpus", "coll", "inplace",
             "outofplace", "minBytes", "maxBytes", "root", "nthreadblocks", "maxcount",
             "redop"},
    "gpu": {"id", "i_chunks", "o_chunks", "s_chunks"},
    "tb": {"id", "send", "recv", "chan"},
    "step": {"s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps",
             "hasdep"},
}
#: element -> the elements it holds
CHILDREN = {"algo": ("gpu",), "gpu": ("tb",), "tb": ("step",), "step": ()}

#: target -> the ``<algo>`` attributes its loader cannot do without
REQUIRED = {
    "msccl-executor": ("minBytes", "maxBytes", "inplace", "outofplace"),
    "rccl": ("minBytes", "maxBytes", "inplace", "outofplace"),
    "msccl": ("inplace",),
}

_KNOWN_TAG = re.compile(rb"<(?!(?:/?(?:algo|gpu|tb|step)[\s/>])|!--|\?)")
_ALGO_TAG = re.compile(rb"<algo\b([^>]*)>")
_NAME = re.compile(rb"([A-Za-z_][-\w.:]*)\s*=")


def _all_known(data: bytes) -> bool:
    """True when every element and attribute name of ``data`` is known, found in a few
    scans of the bytes: the tags, the ``<algo>`` attributes, and as many ``=`` in the rest
    as its gpus, threadblocks and steps have attributes (a misspelt one of theirs leaves the
    element without the attribute it replaces, which the reader refuses; an ``=`` inside a
    value only sends the file to the full check). Opening tags are every ``<`` but the
    closing ones, so only the steps need a count of their own."""
    if _KNOWN_TAG.search(data):
        return False
    m = _ALGO_TAG.search(data)
    if m is None:
        return False
    head = set(_NAME.findall(m.group(1)))
    if not {n.decode() for n in head} <= ATTRIBUTES["algo"]:
        return False
    values = data.count(b"=") - m.group(1).count(b"=") + len(head)
    steps = data.count(b"<step ")
    others = data.count(b"<") - data.count(b"</") - 1 - steps     # the gpus and threadblocks
    expected = (len(head) + steps * len(ATTRIBUTES["step"])
                + others * len(ATTRIBUTES["gpu"]))                 # a gpu's as many as a tb's
    return len(ATTRIBUTES["gpu"]) == len(ATTRIBUTES["tb"]) and values == expected


def check_names(data: bytes, file: str | None = None) -> list[str]:
    """Notes on the unknown names of MSCCL XML ``data``; an XmlError at the first that is a
    misspelling of a known one (element or attribute, with its line and a did-you-mean)."""
    if _all_known(data):
        return []     # (the tree only when something is not)
    from lxml import etree
    try:
        root = etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True,
                                                      remove_comments=True, huge_tree=True))
    except etree.XMLSyntaxError:
        return []     # the reader reports what is wrong with the document
    notes: list[str] = []
    where = f"{file}:" if file else "line "
    stack = [(root, ("algo",))]
    while stack:
        el, allowed = stack.pop()
        if not isinstance(el.tag, str):
            continue
        if el.tag not in allowed:
            hint = did_you_mean(el.tag, allowed)
            what = (f"<{el.tag}> is not an element MSCCL XML has here"
                    f" ({', '.join(f'<{a}>' for a in allowed) or 'none'} expected)")
            if hint:
                raise XmlError(f"{what}; no runtime reads it{hint}", line=el.sourceline,
                               file=file)
            notes.append(f"note: {where}{el.sourceline}: {what}: the runtimes skip it")
            continue
        for name in el.attrib:
            if name in ATTRIBUTES[el.tag]:
                continue
            hint = did_you_mean(name, ATTRIBUTES[el.tag])
            what = f"<{el.tag}> has unknown attribute {name!r}, which no runtime reads"
            if hint:
                raise XmlError(what + hint, line=el.sourceline, file=file)
            notes.append(f"note: {where}{el.sourceline}: {what}")
        stack.extend((child, CHILDREN[el.tag]) for child in reversed(el))
    return notes


def algo_attributes(data: bytes) -> set[str]:
    """The attribute names of the ``<algo>`` start tag of ``data``."""
    m = _ALGO_TAG.search(data)
    return {n.decode() for n in _NAME.findall(m.group(1))} if m else set()


def not_loaded_by(attributes: set[str], target: str) -> str | None:
    """Why runtime ``target`` would refuse at load an ``<algo>`` with these attribute
    names (None when it loads it)."""
    missing = [a for a in REQUIRED.get(target, ()) if a not in attributes]
    if not missing:
        return None
    return (f"{target} does not load it: <algo> has no {', '.join(missing)} "
            f"(its parser requires them)")
