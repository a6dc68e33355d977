"""`python -m turnkeep.cli`: the `turnkeep` command without its console script."""

from turnkeep.cli import main

raise SystemExit(main())
