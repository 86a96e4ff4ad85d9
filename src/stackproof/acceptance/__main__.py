import sys

from stackproof.acceptance.driver import main

sys.exit(main())
