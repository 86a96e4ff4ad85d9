"""Python binding (ctypes) of libmpibind: predict how tasks, threads and GPUs map onto a node.

    import mpibind
    with mpibind.Topology("node.xml") as topo:          # or HWLOC_XMLFILE, or this machine
        for task in mpibind.mapping(4, topology=topo, nthreads=2):
            print(task["task"], task["nthreads"], task["cpus"], task["gpus"])

The shared library is found, in order, from: the `library` argument of `load_library()`,
env MPIBIND_LIBRARY, the path recorded when this package was built, the system loader.
"""
import ctypes
import ctypes.util
import os

__all__ = ["MpibindError", "Topology", "MpibindHandle", "mapping", "load_library",
           "RESTRICT_CPU", "RESTRICT_MEM", "ID_UNIV", "ID_SMI", "ID_PCIBUS", "ID_NAME"]

RESTRICT_CPU, RESTRICT_MEM, ID_UNIV, ID_SMI, ID_PCIBUS, ID_NAME = range(6)
_ID_TYPES = {"uuid": ID_UNIV, "smi": ID_SMI, "pci": ID_PCIBUS, "name": ID_NAME}
_RESTRICT_TYPES = {"cpu": RESTRICT_CPU, "mem": RESTRICT_MEM}


class MpibindError(RuntimeError):
    """A mapping could not be computed (bad input, unreadable topology...)."""


_lib = None


def _candidates(library):
    """An explicit choice (argument or MPIBIND_LIBRARY) is the only candidate: a wrong
    path must fail loudly, not fall back to another library."""
    explicit = library or os.environ.get("MPIBIND_LIBRARY")
    if explicit:
        yield explicit
        return
    try:
        from ._libpath import LIBRARY
        if os.path.exists(LIBRARY):
            yield LIBRARY
    except ImportError:
        pass
    found = ctypes.util.find_library("mpibind")
    if found:
        yield found


def load_library(library=None):
    """Load libmpibind (once); returns the ctypes library."""
    global _lib
    if _lib is not None and library is None:
        return _lib
    errors = []
    for path in _candidates(library):
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as exc:
            errors.append(f"{path}: {exc}")
    else:
        raise MpibindError("libmpibind.so not found: set MPIBIND_LIBRARY to its path "
                           "(e.g. build/mpibind/lib/libmpibind.so)"
                           + ("; tried " + "; ".join(errors) if errors else ""))
    _declare(lib)
    _lib = lib
    return lib


def _declare(lib):
    P, I, S = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
    sigs = {
        "mpibind_init": (I, [ctypes.POINTER(P)]),
        "mpibind_finalize": (I, [P]),
        "mpibind_errmsg": (S, [P]),
        "mpibind_open_topology": (I, [ctypes.POINTER(P), S, ctypes.c_char_p, ctypes.c_size_t]),
        "mpibind_close_topology": (None, [P]),
        "mpibind_set_ntasks": (I, [P, I]),
        "mpibind_set_nthreads": (I, [P, I]),
        "mpibind_set_greedy": (I, [P, I]),
        "mpibind_set_gpu_optim": (I, [P, I]),
        "mpibind_set_smt": (I, [P, I]),
        "mpibind_set_restrict_ids": (I, [P, S]),
        "mpibind_set_restrict_type": (I, [P, I]),
        "mpibind_set_gpus_allowed": (I, [P, S]),
        "mpibind_set_topology": (I, [P, P]),
        "mpibind": (I, [P]),
        "mpibind_get_ntasks": (I, [P]),
        "mpibind_get_nthreads": (ctypes.POINTER(I), [P]),
        "mpibind_get_cpus_ptask": (ctypes.POINTER(I), [P, I, ctypes.POINTER(I)]),
        "mpibind_cpus_ptask_snprint": (I, [ctypes.c_char_p, ctypes.c_size_t, P, I]),
        "mpibind_set_gpu_ids": (I, [P, I]),
        "mpibind_get_gpus_ptask": (ctypes.POINTER(S), [P, I, ctypes.POINTER(I)]),
        "mpibind_get_num_gpus": (I, [P]),
        "mpibind_get_num_numas": (I, [P]),
        "mpibind_get_greedy_path": (I, [P]),
        "mpibind_get_hw_smt": (I, [P]),
        "mpibind_mapping_snprint": (I, [ctypes.c_char_p, ctypes.c_size_t, P]),
        "mpibind_set_env_vars": (I, [P]),
        "mpibind_get_env_var_names": (ctypes.POINTER(S), [P, ctypes.POINTER(I)]),
        "mpibind_get_env_var_values": (ctypes.POINTER(S), [P, S]),
        "mpibind_apply": (I, [P, I]),
        "mpibind_version": (S, []),
        "mpibind_hwloc_version": (S, []),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args


def _b(text):
    return None if text is None else str(text).encode()


class _Owned:
    """A library object freed by close(): usable in `with`, and freed when garbage-collected."""

    def close(self):
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may already be gone
            pass


class Topology(_Owned):
    """A topology loaded once (XML file, HWLOC_XMLFILE, or this machine) and shared by mappings."""

    def __init__(self, path=None, library=None):
        self._lib = load_library(library)
        path = path if path is not None else os.environ.get("HWLOC_XMLFILE") or None
        self.path = None if path is None else os.fspath(path)
        self._ptr = ctypes.c_void_p()
        err = ctypes.create_string_buffer(512)
        if self._lib.mpibind_open_topology(ctypes.byref(self._ptr), _b(self.path), err, 512) != 0:
            raise MpibindError(err.value.decode())

    def close(self):
        if self._ptr:
            self._lib.mpibind_close_topology(self._ptr)
            self._ptr = ctypes.c_void_p()



class MpibindHandle(_Owned):
    """One mapping computation; mirrors the C API. None means "library default"."""

    def __init__(self, ntasks, nthreads=None, greedy=None, gpu_optim=None, smt=None,
                 restrict_ids=None, restrict_type=None, topology_file=None, topology=None,
                 gpus_allowed=None, library=None):
        self._lib = load_library(library)
        if topology is None:
            topology = Topology(topology_file, library)
        self.topology = topology  # keeps it alive as long as the handle
        h = ctypes.c_void_p()
        if self._lib.mpibind_init(ctypes.byref(h)) != 0:
            raise MemoryError("mpibind_init failed")
        self._h = h
        calls = [("mpibind_set_ntasks", ntasks)]
        for name, value in (("nthreads", nthreads), ("greedy", greedy), ("gpu_optim", gpu_optim),
                            ("smt", smt)):
            if value is not None:
                calls.append((f"mpibind_set_{name}", int(value)))
        if restrict_type is not None:
            rtype = _RESTRICT_TYPES.get(restrict_type, restrict_type)
            calls.append(("mpibind_set_restrict_type", rtype))
        if restrict_ids is not None:
            calls.append(("mpibind_set_restrict_ids", _b(restrict_ids)))
        if gpus_allowed is not None:
            calls.append(("mpibind_set_gpus_allowed", _b(gpus_allowed)))
        calls.append(("mpibind_set_topology", topology._ptr))
        for fn, arg in calls:
            if getattr(self._lib, fn)(self._h, arg) != 0:
                raise MpibindError(self._error())
        self.ntasks = ntasks
        self._mapped = False

    def _error(self):
        return self._lib.mpibind_errmsg(self._h).decode()

    def mpibind(self):
        if self._lib.mpibind(self._h) != 0 or self._lib.mpibind_set_env_vars(self._h) != 0:
            raise MpibindError(self._error())
        self._mapped = True
        return self

    def _need_mapping(self):
        if not self._mapped:
            self.mpibind()

    @property
    def nthreads(self):
        self._need_mapping()
        arr = self._lib.mpibind_get_nthreads(self._h)
        return [arr[i] for i in range(self.ntasks)]

    def get_cpus_ptask(self, task):
        """OS CPU ids of a task."""
        self._need_mapping()
        n = ctypes.c_int()
        arr = self._lib.mpibind_get_cpus_ptask(self._h, task, ctypes.byref(n))
        if not arr:
            raise IndexError(task)
        return [arr[i] for i in range(n.value)]

    def get_cpus_str(self, task):
        """hwloc list string of a task's CPUs, e.g. '0-4,36-40'."""
        self._need_mapping()
        size = self._lib.mpibind_cpus_ptask_snprint(None, 0, self._h, task)
        if size < 0:
            raise IndexError(task)
        buf = ctypes.create_string_buffer(size + 1)
        self._lib.mpibind_cpus_ptask_snprint(buf, size + 1, self._h, task)
        return buf.value.decode()

    def get_gpus_ptask(self, task, id_type="smi"):
        """GPU ids of a task: 'smi' (as exported), 'pci', 'uuid' or 'name'."""
        self._need_mapping()
        self._lib.mpibind_set_gpu_ids(self._h, _ID_TYPES[id_type])
        n = ctypes.c_int()
        arr = self._lib.mpibind_get_gpus_ptask(self._h, task, ctypes.byref(n))
        if not arr:
            raise IndexError(task)
        return [arr[i].decode() for i in range(n.value)]

    def env_vars(self):
        """{name: [value of task 0, task 1, ...]}"""
        self._need_mapping()
        count = ctypes.c_int()
        names = self._lib.mpibind_get_env_var_names(self._h, ctypes.byref(count))
        out = {}
        for i in range(count.value):
            vals = self._lib.mpibind_get_env_var_values(self._h, names[i])
            out[names[i].decode()] = [vals[t].decode() for t in range(self.ntasks)]
        return out

    def mapping_text(self):
        self._need_mapping()
        self._lib.mpibind_set_gpu_ids(self._h, ID_SMI)
        size = self._lib.mpibind_mapping_snprint(None, 0, self._h)
        buf = ctypes.create_string_buffer(size + 1)
        self._lib.mpibind_mapping_snprint(buf, size + 1, self._h)
        return buf.value.decode()

    @property
    def num_gpus(self):
        self._need_mapping()
        return self._lib.mpibind_get_num_gpus(self._h)

    @property
    def num_numas(self):
        self._need_mapping()
        return self._lib.mpibind_get_num_numas(self._h)

    @property
    def greedy_path(self):
        self._need_mapping()
        return bool(self._lib.mpibind_get_greedy_path(self._h))

    @property
    def hw_smt(self):
        self._need_mapping()
        return self._lib.mpibind_get_hw_smt(self._h)

    def apply(self, task):
        """Bind the calling process to a task's CPUs."""
        self._need_mapping()
        if self._lib.mpibind_apply(self._h, task) != 0:
            raise MpibindError(self._error())

    def tasks(self):
        """[{"task", "nthreads", "cpus", "gpus", "gpus_pci", "env"}] for every task."""
        self._need_mapping()
        env = self.env_vars()
        nthreads = self.nthreads
        return [{"task": t, "nthreads": nthreads[t], "cpus": self.get_cpus_str(t),
                 "gpus": self.get_gpus_ptask(t), "gpus_pci": self.get_gpus_ptask(t, "pci"),
                 "env": {k: v[t] for k, v in env.items()}}
                for t in range(self.ntasks)]

    def close(self):
        if getattr(self, "_h", None):
            self._lib.mpibind_finalize(self._h)
            self._h = None



def mapping(ntasks, topology=None, topology_file=None, **params):
    """Mapping of ntasks tasks as a list of dicts; params as for MpibindHandle."""
    with MpibindHandle(ntasks, topology=topology, topology_file=topology_file, **params) as h:
        return h.mpibind().tasks()


def version():
    lib = load_library()
    return lib.mpibind_version().decode(), lib.mpibind_hwloc_version().decode()
