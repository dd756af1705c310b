"""``python -m bmrm``: the ``bmrm`` command line (see :mod:`bmrm.cli`)."""

from bmrm.cli import main

raise SystemExit(main())
