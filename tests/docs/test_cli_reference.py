"""docs/cli.md documents exactly the commands and options the argparse parser defines.

The page has one ``## msccl-py CMD ...`` section per command (nested ones
too) whose table's first column names the options and positionals in
backticks; ``## Options every command takes`` lists those shared by all.
``msccl-py compile NAME`` documents the library-program options that the
compile command parses from its ARGS (named in ARGS's help text).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from msccl_py.cli import build_parser

CLI_MD = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
COMMON = "Options every command takes"
_HEADING = re.compile(r"^## (.+?)\s*$", re.M)
_CODE = re.compile(r"`([^`]+)`")


def sections() -> dict[str, str]:
    """Heading -> body of every ``##`` section of cli.md."""
    text = CLI_MD.read_text()
    heads = list(_HEADING.finditer(text))
    return {m.group(1): text[m.end():heads[i + 1].start() if i + 1 < len(heads) else None]
            for i, m in enumerate(heads)}


def documented(body: str) -> tuple[set[str], set[str]]:
    """(option strings, positional names) in the first column of the section's tables."""
    options, positionals = set(), set()
    for line in body.splitlines():
        if not line.startswith("| `"):
            continue
        first = re.split(r"(?<!\\)\|", line)[1]
        for code in _CODE.findall(first):
            token = code.split()[0].replace("\\|", "|")
            (options if token.startswith("-") else positionals).add(token)
    return options, positionals


def parsers() -> dict[str, argparse.ArgumentParser]:
    """``"msccl-py compile"`` etc. -> its parser, walking nested subcommands."""
    found = {}

    def walk(parser, path):
        found[" ".join(path)] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, path + [name])

    walk(build_parser(), ["msccl-py"])
    return found


def defined(parser: argparse.ArgumentParser) -> tuple[set[str], set[str]]:
    options, positionals = set(), set()
    for action in parser._actions:
        if action.option_strings:
            options.update(action.option_strings)
        else:
            positionals.add(action.metavar or action.dest)
    return options, positionals


PARSERS = parsers()
SECTIONS = sections()
COMMON_OPTIONS = documented(SECTIONS.get(COMMON, ""))[0]


def test_every_command_has_a_section():
    assert set(PARSERS) <= set(SECTIONS), sorted(set(PARSERS) - set(SECTIONS))


def test_every_section_is_a_command():
    extra = {h for h in SECTIONS if h.startswith("msccl-py")} - set(PARSERS)
    assert extra == {"msccl-py compile NAME"}


def test_common_options_exist_everywhere():
    assert COMMON_OPTIONS == {"-h", "--help", "--debug"}
    for name, parser in PARSERS.items():
        assert COMMON_OPTIONS <= defined(parser)[0], name


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_command_options_match(command):
    opts, pos = defined(PARSERS[command])
    doc_opts, doc_pos = documented(SECTIONS[command])
    assert opts - COMMON_OPTIONS - doc_opts == set(), f"{command}: undocumented options"
    assert doc_opts - opts == set(), f"{command}: documented options that do not exist"
    assert pos == doc_pos, f"{command}: positionals differ"


def _library_options() -> set[str]:
    """Options ``compile NAME`` takes, as its ARGS help names them."""
    args = next(a for a in PARSERS["msccl-py compile"]._actions if a.dest == "args")
    return set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", args.help))


def test_library_compile_options_match():
    doc_opts, doc_pos = documented(SECTIONS["msccl-py compile NAME"])
    named = _library_options()
    assert {"--ranks", "--param", "--instances", "--protocol", "-o"} <= named
    assert named - doc_opts == set(), "library options named in --help but not documented"
    compile_opts = defined(PARSERS["msccl-py compile"])[0]
    assert doc_opts - named - compile_opts == set(), "documented options that do not exist"
    assert doc_pos == set()


def test_library_compile_options_are_accepted(tmp_path):
    # every documented library option really works
    from msccl_py.cli import main
    out = tmp_path / "r.xml"
    assert main(["compile", "allreduce_ring", "--ranks", "4", "--param", "channels=2",
                 "--instances", "2", "--protocol", "LL", "--target", "msccl", "--force",
                 "--output", str(out)]) == 0
    text = out.read_text()
    assert 'proto="LL"' in text and 'ngpus="4"' in text and 'nchannels="4"' in text


def test_documented_choices_are_real():
    # the dialect names and backends the page lists are those the code has
    from msccl_py.cli.run import BACKENDS
    from msccl_py.targets.msccl.dialects import DIALECTS
    text = CLI_MD.read_text()
    assert "`--target {" + ",".join(sorted(DIALECTS)) + "}`" in text
    run_body = SECTIONS["msccl-py run"]
    for backend in BACKENDS:
        assert f"`{backend}`" in run_body
    top = documented(SECTIONS["msccl-py"])[1]
    assert top == {"COMMAND"}
    commands = {name.split()[1] for name in PARSERS if name.count(" ") == 1}
    for cmd in commands:
        assert f"`{cmd}`" in SECTIONS["msccl-py"]
