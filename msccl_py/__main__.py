import sys

from msccl_py.cli import main

sys.exit(main())
