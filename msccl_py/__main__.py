"""``python -m msccl_py``: the ``msccl-py`` command."""

import sys

from msccl_py.cli import main

if __name__ == "__main__":   # importing the module (docs checks, tools) runs nothing
    sys.exit(main())
