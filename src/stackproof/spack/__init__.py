"""Spack: the environments of spack-envs/ checked, concretized, locked, mirrored and installed.

pins      spack-envs/pins.yaml and what follows from it without Spack (locks' inputs, release tarball)
check     the consistency check that needs no Spack (`stackproof spack lint`)
driver    one pinned Spack checkout run with private scopes: audit, offline concretization
lock      concretize every environment, compare with or rewrite the committed spack.lock files
mirror    the project's release tarball in a Spack source mirror
install   spack install of an environment from its committed lock
cli       `stackproof spack lint|check|lock|mirror|install`

May import: basics (errors, paths, yamlfile). Nothing else in stackproof imports it but the CLI.
"""
