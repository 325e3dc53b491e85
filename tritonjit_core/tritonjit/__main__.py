"""``python -m tritonjit``: the same as the ``tritonjit`` command."""

import sys

from .cli import main

sys.exit(main())
