import sys

from fundgrpo.serving.dashboard import main

sys.exit(main())
