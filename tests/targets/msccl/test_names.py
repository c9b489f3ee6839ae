"""Unknown XML names are reported (a misspelling with its line and a did-you-mean), and a
file a target's loader refuses is not ok for that target (verify and info)."""

from __future__ import annotations

import pytest

from msccl_py.cli import main
from msccl_py.errors import XmlError
from msccl_py.targets.msccl.names import algo_attributes, check_names, not_loaded_by


@pytest.fixture(scope="module")
def ring(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("names") / "ring.xml"
    assert main(["compile", "allreduce_ring", "--ranks", "4", "-o", str(path)]) == 0
    return path.read_text()


def _write(tmp_path, text: str, name: str = "x.xml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_known_names_need_no_tree(ring):
    assert check_names(ring.encode()) == []


def test_misspelt_attribute_is_an_error_with_did_you_mean(ring, tmp_path, capsys):
    path = _write(tmp_path, ring.replace(" maxBytes=", " maxbytes="))
    assert main(["verify", path]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"error: {path}:1: <algo> has unknown attribute 'maxbytes', which no "
                   f"runtime reads; did you mean `maxBytes`?\n")


def test_misspelt_element_names_its_own_line(ring, tmp_path, capsys):
    lines = ring.splitlines()
    k = next(i for i, line in enumerate(lines) if "<step " in line) + 1   # the second step
    lines[k] = lines[k].replace("<step ", "<stpe ")
    path = _write(tmp_path, "\n".join(lines))
    assert main(["verify", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}:{k + 1}: <stpe> is not an element"), err
    assert "did you mean `step`?" in err and len(err.splitlines()) == 1


def test_other_unknown_names_are_notes(ring, tmp_path, capsys):
    path = _write(tmp_path, ring.replace(' inplace="1"', ' inplace="1" colour="red"'))
    assert main(["verify", path]) == 0
    err = capsys.readouterr().err
    assert f"note: {path}:1: <algo> has unknown attribute 'colour'" in err


def test_target_whose_loader_refuses_the_file_is_not_ok(ring, tmp_path, capsys):
    old = ring.replace(' outofplace="0" minBytes="0" maxBytes="1099511627776"', "")
    assert old != ring
    path = _write(tmp_path, old)
    for target in ("msccl-executor", "rccl"):
        assert main(["verify", path, "--target", target]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith(f"error: {path}:1: not ok for --target {target}: "
                                            f"{target} does not load it: <algo> has no "
                                            f"minBytes, maxBytes, outofplace"), err
    assert main(["verify", path, "--target", "msccl"]) == 0
    capsys.readouterr()
    # by default: verified for the runtime that loads it, and said so
    assert main(["verify", path]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("ok:") and "note: verified for --target msccl:" in err
    assert main(["info", path]) == 0
    out = capsys.readouterr().out
    assert "target msccl: within limits" in out
    assert "target msccl-executor: not loaded: msccl-executor does not load it" in out


def test_not_loaded_by_reads_the_start_tag():
    attrs = algo_attributes(b'<algo name="a" inplace="1" outofplace="0" minBytes="0" '
                            b'maxBytes="8">')
    assert not_loaded_by(attrs, "msccl-executor") is None
    assert not_loaded_by(attrs - {"maxBytes"}, "rccl") == (
        "rccl does not load it: <algo> has no maxBytes (its parser requires them)")
    with pytest.raises(XmlError):
        check_names(b'<algo nchanels="1"/>')


def test_an_extra_attribute_deep_in_the_file_is_found(ring):
    lines = ring.splitlines()
    k = max(i for i, line in enumerate(lines) if "<step " in line)
    lines[k] = lines[k].replace(' hasdep=', ' hasdeps="0" hasdep=')
    with pytest.raises(XmlError, match=rf"^line {k + 1}: <step> has unknown attribute "
                                       r"'hasdeps'.*did you mean `hasdep`\?"):
        check_names("\n".join(lines).encode())
    lines[k] = lines[k].replace(' hasdeps="0"', ' note="x"')
    notes = check_names("\n".join(lines).encode(), "f.xml")
    assert notes == [f"note: f.xml:{k + 1}: <step> has unknown attribute 'note', which no "
                     f"runtime reads"]
