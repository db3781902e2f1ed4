"""``python -m interactions_core`` is the ``interactions`` command."""

from .cli import main

raise SystemExit(main())
