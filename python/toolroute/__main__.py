"""`python -m toolroute` is the `toolroute` command."""

import sys

from toolroute.cli import main

sys.exit(main())
