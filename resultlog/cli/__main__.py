"""`python -m resultlog.cli`: the command line."""

import sys

from resultlog.cli import main

sys.exit(main())
