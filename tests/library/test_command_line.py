"""msccl_py.library.script: the command lines programs share (the declared one and the positional-count one)."""

import doctest

import pytest

from msccl_py.library import script


def test_docstring_examples():
    result = doctest.testmod(script)
    assert result.attempted > 0 and result.failed == 0


def test_ranks_parser_takes_positional_counts_in_order():
    parser = script.ranks_parser("Ring allreduce.\n\nMore.", ("channels", "rings"),
                                 ("instances", "instances"))
    args = parser.parse_args(["8", "2", "3", "--protocol", "LL"])
    assert (script.given_ranks(parser, args), args.channels, args.instances, args.protocol) == \
        (8, 2, 3, "LL")
    args = parser.parse_args(["--ranks", "6"])
    assert (script.given_ranks(parser, args), args.channels, args.protocol) == (6, 1, "Simple")
    assert parser.description == "Ring allreduce."


def test_given_ranks_is_a_usage_error_when_missing(capsys):
    parser = script.ranks_parser("Demo.")
    with pytest.raises(SystemExit) as info:
        script.given_ranks(parser, parser.parse_args([]))
    assert info.value.code == 2
    assert "give NUM_RANKS or --ranks" in capsys.readouterr().err
