"""``python -m nwensemble``."""

import sys

from nwensemble._cli import main

sys.exit(main())
