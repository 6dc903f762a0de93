"""``python -m specperf.checkpoints [NAME ...]``: build (or find) builtins, print paths."""

from . import main

raise SystemExit(main())
