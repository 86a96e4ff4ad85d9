"""Is a stack's MPI CUDA-aware? (OSU device/managed buffers run only when it is.)

Order: $STACKPROOF_<STACK>_CUDA_AWARE (1/0: the site's own verdict, e.g. from
MPIX_Query_cuda_support() or the vendor's documentation), else Open MPI's `ompi_info --parsable
--all` of the stack (`mpi_built_with_cuda_support:value:true|false`, the compile-time fact that
MPIX_CUDA_AWARE_SUPPORT reflects), else unknown. Debian's and Ubuntu's Open MPI say false.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess

PARAM = re.compile(r"^mca:(?:mpi|opal):base:param:(?:mpi|opal)_built_with_cuda_support:value:(true|false)$", re.M)


def override_var(stack: str) -> str:
    return f"STACKPROOF_{stack.upper()}_CUDA_AWARE"


def cuda_aware(stack: str, view_bin: str) -> tuple[bool | None, str]:
    """(True/False/None for unknown, the reason in words)."""
    var = override_var(stack)
    value = os.environ.get(var, "").strip().lower()
    if value in ("1", "yes", "true"):
        return True, f"${var}={value}"
    if value in ("0", "no", "false"):
        return False, f"${var}={value}"
    path = os.pathsep.join(p for p in (view_bin, os.environ.get("PATH", "")) if p)
    ompi_info = shutil.which("ompi_info", path=path)
    if ompi_info is None:
        return None, (f"cannot tell whether stack {stack!r}'s MPI is CUDA-aware: no ompi_info (Open MPI) in "
                      f"{view_bin} or PATH; set {var}=1 where MPIX_Query_cuda_support() says so")
    try:
        proc = subprocess.run([ompi_info, "--parsable", "--all"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{ompi_info} failed: {exc}"
    m = PARAM.search(proc.stdout)
    if m is None:
        return None, f"{ompi_info} does not report mpi_built_with_cuda_support; set {var}=1 or 0"
    if m.group(1) == "true":
        return True, f"{ompi_info}: built with CUDA support"
    return False, (f"stack {stack!r}'s MPI is not CUDA-aware ({ompi_info}: mpi_built_with_cuda_support "
                   "false): device and managed buffers need a CUDA-aware MPI (Open MPI/UCX built with CUDA)")
