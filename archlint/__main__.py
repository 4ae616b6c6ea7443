import sys

from archlint.cli import main

sys.exit(main())
