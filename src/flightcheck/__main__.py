"""``python -m flightcheck``: the same as the ``flightcheck`` console script."""

import sys

from flightcheck._cli.main import main

sys.exit(main())
