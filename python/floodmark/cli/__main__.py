"""``python -m floodmark.cli``: the ``floodmark`` command."""

import sys

from floodmark.cli import main

sys.exit(main())
