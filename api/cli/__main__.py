"""`python -m episodelake.api.cli`: the `elake` command without its entry-point script."""

import sys

from episodelake.api.cli import main

sys.exit(main())
