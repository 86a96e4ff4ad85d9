"""Small helpers of the stackproof checks: the CLI of the running Python, process grids, and the
one stack that runs the node checks."""
import os
import sys


def stackproof_cmd(*args):
    """The stackproof CLI of the running Python (ReFrame runs inside the project venv)."""
    return [sys.executable, '-m', 'stackproof.cli', *args]


def dims_create(nprocs, ndims=3):
    """Balanced factorisation like MPI_Dims_create: 320 -> [8, 8, 5], 2 -> [2, 1, 1]."""
    factors = []
    n, f = nprocs, 2
    while n > 1:
        while n % f == 0:
            factors.append(f)
            n //= f
        f += 1
    dims = [1] * ndims
    for f in sorted(factors, reverse=True):
        dims[dims.index(min(dims))] *= f
    return sorted(dims, reverse=True)


def system_checks_stack():
    """STACKPROOF_NOISE_STACK: the one stack that runs the system checks (profile x noise matrix,
    core specialization, binding), which measure the nodes, not the stack; unset: every stack."""
    name = os.environ.get('STACKPROOF_NOISE_STACK')
    return [f'+stack-{name}'] if name else None
