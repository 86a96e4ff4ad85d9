"""How a check lays out its job: the nodes a task count needs, the process grid of a rank count."""


def nodes_needed(num_tasks, num_tasks_per_node):
    """Nodes for `num_tasks` at `num_tasks_per_node` each (at least 1)."""
    if not num_tasks or num_tasks <= 0:
        return 1
    per_node = num_tasks_per_node or 1
    return -(-num_tasks // per_node)


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
