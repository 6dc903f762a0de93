"""`python -m specperf.cli`."""

import sys

from . import main

sys.exit(main())
