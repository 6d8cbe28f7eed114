import sys

from edge.cli.entry import main

sys.exit(main())
