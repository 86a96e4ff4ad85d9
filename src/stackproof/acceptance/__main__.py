import sys

from stackproof.acceptance import main

sys.exit(main())
