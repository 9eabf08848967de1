import sys

from batchlab.apps.cli import main

sys.exit(main())
