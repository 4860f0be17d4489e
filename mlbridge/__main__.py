"""``python -m mlbridge``: the same as the ``mlbridge`` command."""

import sys

from mlbridge.cli import main

sys.exit(main())
