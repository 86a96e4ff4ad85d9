"""A stack's installation and run environment, checked before anything is built or launched: the
vendor MPI's pitfalls (not installed, I_MPI_ROOT unset or wrong, I_MPI_PMI_LIBRARY pointing nowhere).
Used by `stackproof stack check` (preflight.py) and `stack build` (commands.py); depends only on the model.
"""
from __future__ import annotations

import re
from pathlib import Path

from stackproof.stacks.model import Stack, StackError


def environment_problems(stack: Stack, env: dict[str, str] | None = None) -> list[str]:
    """What is wrong with the stack's installation and run environment (each with its fix)."""
    env = stack.run_env() if env is None else env
    problems = []
    lib_dir = Path(stack.mpi_library_dir) if stack.mpi_library_dir else None
    if stack.install_pip:
        have = lib_dir is not None and lib_dir.is_dir() and any(
            re.search(stack.mpi_library, p.name) for p in lib_dir.iterdir())
        if not have:
            return [f"its MPI is not installed (no {stack.mpi_library} in {lib_dir}): run "
                    f"`stackproof stack install {stack.name}`"]      # everything else follows from it
    if stack.mpi_family == "intelmpi":
        root = env.get("I_MPI_ROOT")
        if not root:
            problems.append(f"I_MPI_ROOT is unset (Intel's wrappers then fail with `mpi.h: No such file`): "
                            f"add `env: {{I_MPI_ROOT: ${{prefix}}}}` to {stack.file}")
        elif not Path(root, "include", "mpi.h").is_file():
            problems.append(f"I_MPI_ROOT={root} has no include/mpi.h (Intel's wrappers then fail with "
                            f"`mpi.h: No such file`): point it at the Intel MPI prefix"
                            f"{f' ({stack.prefix})' if stack.prefix else ''}")
    pmi = env.get("I_MPI_PMI_LIBRARY")
    if pmi and not Path(pmi).is_file():
        problems.append(f"I_MPI_PMI_LIBRARY={pmi} does not exist (every task would segfault): unset it, or point "
                        "it at Slurm's libpmi2.so")
    return problems


def check_environment(stack: Stack, env: dict[str, str] | None = None) -> None:
    """StackError (one line: the stack, what is wrong, the fix) unless the stack's MPI is usable."""
    problems = environment_problems(stack, env)
    if problems:
        raise StackError(f"stack {stack.name}: " + "; ".join(problems))
