"""The examples of docs/torch.md run as written: each fenced block after an ``<!-- example:
NAME`` marker is saved as a script and started as ranks (torchrun's variables)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("torch.distributed")

from ranks import launch, report  # noqa: E402
from repo_paths import REPO  # noqa: E402


def example(name: str) -> str:
    text = (REPO / "docs" / "torch.md").read_text()
    m = re.search(rf"<!-- example: {name} .*?-->\n```python\n(.*?)```", text, re.S)
    assert m, f"docs/torch.md has no example {name!r}"
    return m.group(1)


def run_example(tmp_path, name: str, n: int) -> None:
    script = tmp_path / f"{name}.py"
    script.write_text(example(name))
    # torch.compile's cache and every temporary file stay under tmp_path
    ranks = launch(script, n, str(tmp_path / "checkpoint"), timeout=600,
                   env={"TMPDIR": str(tmp_path), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "ind")})
    for r in ranks:
        assert r.returncode == 0, report(ranks)


def test_async_example(tmp_path):
    run_example(tmp_path, "async", 2)


@pytest.mark.slow   # 4 ranks, torch.compile and a checkpoint: about a minute on 2 cores
def test_mesh_example(tmp_path):
    run_example(tmp_path, "mesh", 4)


@pytest.mark.slow
def test_fsdp2_example(tmp_path):
    run_example(tmp_path, "fsdp2", 4)
