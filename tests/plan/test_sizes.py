"""Sizes: every unit parses, and the hint of a size error (and cli.md) names every unit."""

from __future__ import annotations

import re

import pytest

from msccl_py.errors import SizeError
from msccl_py.plan.sizes import UNIT_FACTORS, UNITS, parse_size
from repo_paths import REPO


def test_every_unit_in_the_hint_parses_in_any_case():
    with pytest.raises(SizeError) as info:
        parse_size("1Mi")
    hint = str(info.value)
    named = re.findall(r"\b([KMGT]i?B|[KMGT]|B)\b", hint.split("unit:")[1].split("(")[0])
    assert sorted(named) == sorted(UNIT_FACTORS)
    assert {u.lower() for u in named} | {""} == set(UNITS)    # no unit left unsaid
    for unit, factor in UNIT_FACTORS.items():
        assert parse_size(f"3{unit}") == parse_size(f"3{unit.lower()}") == 3 * factor
    assert parse_size("1.5KB") == 1500 and parse_size("64M") == 64 << 20


def test_cli_reference_lists_every_unit():
    text = (REPO / "docs" / "cli.md").read_text()
    para = text[text.index("Sizes ("):].split("\n\n")[0]
    assert set(UNIT_FACTORS) <= set(re.findall(r"`([A-Za-z]+)`", para))
