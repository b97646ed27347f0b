"""``python -m rigmon`` runs the command line."""

from __future__ import annotations

import sys

from rigmon.cli import main

sys.exit(main())
