"""`python -m cattn ...`: the same as the `cattn` command."""
import sys

from .cli import main

sys.exit(main())
