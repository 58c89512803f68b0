"""`python -m asynceval ...`, the same as the `asynceval` command."""

import sys

from .cli import main

sys.exit(main())
