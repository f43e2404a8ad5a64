"""``python -m judge`` runs the ``dst-judge`` command."""

import sys

from .cli import main

sys.exit(main())
