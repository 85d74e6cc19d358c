"""`python3 -m bench` (scripts/bench runs it so)."""
import sys

from .cli import main

sys.exit(main())
