"""`python -m aiayn` (also what `torchrun -m aiayn` runs)."""

import sys

from aiayn.cli.main import main

sys.exit(main())
