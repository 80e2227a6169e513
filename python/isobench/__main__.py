"""`python -m isobench` is the `isobench` command."""

import sys

from .cli import main

sys.exit(main())
