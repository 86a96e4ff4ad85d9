# A real Warewulf wwctl for the tests that compare it with our overlay renderer (docs/warewulf.md).
#   make wwctl WAREWULF_SRC=/path/to/warewulf [WWCTL_PREFIX=...]
#       build + install Warewulf v4.7.0 from your checkout into WWCTL_PREFIX (outside the repo;
#       needs Go >= 1.22 and the Go module proxy), then:
#   make warewulf-real-test [WWCTL=...]   the wwctl tests with that wwctl (skips nothing)
WAREWULF_SRC ?=
WWCTL_PREFIX ?= $(abspath $(REPO)/../build/wwctl)
WWCTL ?= $(WWCTL_PREFIX)/bin/wwctl

.PHONY: wwctl warewulf-real-test
wwctl:
	@test -n "$(WAREWULF_SRC)" || { echo "usage: make wwctl WAREWULF_SRC=/path/to/warewulf-v4.7.0-checkout [WWCTL_PREFIX=$(WWCTL_PREFIX)]" >&2; exit 2; }
	@nice -n 10 ./images/warewulf/build-wwctl.sh "$(WAREWULF_SRC)" "$(WWCTL_PREFIX)"

warewulf-real-test: venv
	@test -x "$(WWCTL)" || { echo "no wwctl at $(WWCTL): make wwctl WAREWULF_SRC=... first, or WWCTL=/path/to/wwctl" >&2; exit 2; }
	@STACKPROOF_WWCTL="$(WWCTL)" $(PY) -m pytest -q -rs tests/test_images_warewulf.py tests/test_warewulf_real.py
