"""Every command's --help prints its usage (argparse formats help text with %-codes)."""

from __future__ import annotations

import argparse

import pytest

from msccl_py.cli import build_parser, main


def _commands() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


@pytest.mark.parametrize("argv", [[]] + [[c] for c in _commands()], ids=lambda a: " ".join(a) or "msccl-py")
def test_help_prints_usage(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("usage: msccl-py")
