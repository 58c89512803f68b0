"""`python -m asynceval.cli ...`, the same as the `asynceval` command."""

import sys

from . import main

sys.exit(main())
