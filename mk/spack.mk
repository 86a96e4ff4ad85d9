# Spack environments (spack-envs/) and the project's Spack repository (spack-envs/repo).
#   make spack-lint    YAML lint + structural check (always; no Spack needed; part of make test)
#   make spack-check   spack-lint, then concretize every environment offline when SPACK_ROOT is set
#                      (a Spack v1.1.0 checkout; SPACK_PACKAGES_ROOT = spack-packages v2025.11.0),
#                      otherwise print the skip message; times per environment in $(BUILD)/spack
#   make spack-lock    concretize and write spack-envs/<env>/spack.lock (commit them)
SPACK_ENVS    := $(REPO)/spack-envs
SPACK_WORKDIR := $(BUILD)/spack
SPACK_CHECK   := $(PY) -m stackproof.cli spack-check --workdir $(SPACK_WORKDIR)

.PHONY: spack-lint spack-check spack-lock
spack-lint: venv
	@echo "== spack-envs: yamllint + structural check"
	@$(VENV)/bin/yamllint --strict -c $(SPACK_ENVS)/.yamllint $(SPACK_ENVS)
	@$(SPACK_CHECK)

spack-check: venv
	@echo "== spack-envs: yamllint + structural check + offline concretization (if SPACK_ROOT)"
	@$(VENV)/bin/yamllint --strict -c $(SPACK_ENVS)/.yamllint $(SPACK_ENVS)
	@$(SPACK_CHECK) --concretize --skip-missing

spack-lock: venv
	@$(SPACK_CHECK) --update-lock

TEST_TARGETS += spack-check
