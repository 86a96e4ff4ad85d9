# Spack environments (spack-envs/) and the project's Spack repository (spack-envs/repo); each target is
# one `stackproof spack <verb>` (src/stackproof/spack/).
#   make spack-lint    yamllint + consistency check: pins, files parse, lock roots = spack.yaml specs,
#                      pins/recipes/yaml/lock agree (no Spack needed; CI)
#   make spack-check   spack-lint, then, when SPACK_ROOT is set (Spack v1.1.0; SPACK_PACKAGES_ROOT =
#                      spack-packages v2025.11.0): spack audit configs/packages/packages-https, offline
#                      concretization (unshare -n) of every environment compared with its committed lock,
#                      and of the environments listed in pins.yaml `sites` with each site packages.yaml;
#                      without SPACK_ROOT it prints why those are skipped
#   make spack-lock    concretize every environment with isolated scopes, write spack-envs/<env>/spack.lock
#   make spack-mirror  the project's release tarball in a Spack source mirror ($(SPACK_WORKDIR)/mirror)
#   make spack-install SPACK_ENV=laptop SPACK_SCOPE=DIR   spack install an environment from its lock,
#                      offline (loopback up), with the site's mirrors in SPACK_SCOPE; writes its view
SPACK_ENVS    := $(REPO)/spack-envs
SPACK_WORKDIR := $(BUILD)/spack
SPACK_CLI     := $(PY) -m stackproof.cli spack

.PHONY: spack-lint spack-check spack-lock spack-mirror spack-install
spack-lint: venv
	@echo "== spack-envs: yamllint + consistency check"
	@$(VENV)/bin/yamllint --strict -c $(SPACK_ENVS)/.yamllint $(SPACK_ENVS)
	@$(SPACK_CLI) lint

spack-check: venv
	@echo "== spack-envs: yamllint + consistency check + spack audit + offline concretization (if SPACK_ROOT)"
	@$(VENV)/bin/yamllint --strict -c $(SPACK_ENVS)/.yamllint $(SPACK_ENVS)
	@$(SPACK_CLI) check --skip-missing --workdir $(SPACK_WORKDIR)

spack-lock: venv
	@$(SPACK_CLI) lock --workdir $(SPACK_WORKDIR)

spack-mirror: venv
	@$(SPACK_CLI) mirror $(SPACK_WORKDIR)/mirror

SPACK_ENV ?= laptop
spack-install: venv
	@test -n "$(SPACK_SCOPE)" || { echo "spack-install: set SPACK_SCOPE=DIR (mirrors.yaml, packages.yaml git mirrors; docs/spack.md)" >&2; exit 1; }
	@$(SPACK_CLI) install $(SPACK_ENV) --scope $(SPACK_SCOPE) --workdir $(SPACK_WORKDIR)

TEST_TARGETS += spack-check
