"""``python -m flightcheck``: the same as the ``flightcheck`` console script."""

import sys

from ._cli import main

sys.exit(main())
