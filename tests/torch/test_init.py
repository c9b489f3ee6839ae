"""``import msccl_py.torch`` without torch: one line that names the CPU install."""

from __future__ import annotations

import subprocess
import sys


def test_missing_torch_names_the_cpu_install():
    # sys.modules["torch"] = None makes ``import torch`` fail as where it is not installed
    code = "import sys; sys.modules['torch'] = None; import msccl_py.torch"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last == ("ModuleNotFoundError: msccl_py.torch needs torch, which is not installed: "
                    "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu")
