"""Run fwq-mpi / fwq-th and the noise injectors from Python, with a pluggable launcher.

A launcher is the list of words placed before the fwq binary: `mpirun_launcher(2)` gives
["mpirun", "-np", "2", "--bind-to", "core", ...]; under Slurm pass e.g. ["srun", "-n2", "--cpu-bind=cores"].
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stackproof.errors import StackproofError
from stackproof.paths import REPO
from stackproof.noise.trace import Trace, load


def build_dir() -> Path:
    """Where the fwq binaries are: $STACKPROOF_FWQ_BUILD, else build/fwq of the repository."""
    return Path(os.environ.get("STACKPROOF_FWQ_BUILD", REPO / "build" / "fwq"))


def binary(name: str) -> Path:
    """fwq-mpi, fwq-th, fwq-noise or libfwq-selfish.so from the build directory.

    An installed fwq (an image's /opt/stackproof, STACKPROOF_FWQ_BUILD=PREFIX/bin) keeps the library
    where `cmake --install` puts it, PREFIX/lib: look there too for a library."""
    path = build_dir() / name
    if not path.exists() and name.endswith(".so"):
        installed = build_dir().parent / "lib" / name
        path = installed if installed.exists() else path
    if not path.exists():
        raise StackproofError(f"{path} not found: build it with `make fwq` (or set STACKPROOF_FWQ_BUILD)")
    return path


def mpi_env() -> dict:
    """Environment for Open MPI launches (root is allowed: this harness runs as root)."""
    env = dict(os.environ)
    if os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


def mpirun_launcher(nranks: int, cpus: str | None = None, oversubscribe: bool = False) -> list[str]:
    """Open MPI launcher: one rank per core, optionally restricted to a CPU list (e.g. "1" or "2-3")."""
    if shutil.which("mpirun") is None:
        raise StackproofError("mpirun not found (install openmpi-bin, or use the threads mode fwq-th)")
    # overload-allowed: let fwq-mpi itself refuse (or accept) more ranks than cores
    if cpus is not None:  # rank i on the i-th CPU of the list
        words = ["mpirun", "-np", str(nranks), "--cpu-list", cpus, "--bind-to",
                 "cpu-list:ordered" + (",overload-allowed" if oversubscribe else "")]
    else:
        words = ["mpirun", "-np", str(nranks), "--bind-to", "core:overload-allowed" if oversubscribe else "core"]
    if oversubscribe:
        words += ["--oversubscribe"]
    return words


def shielded(command: list[str], nice: int = -20) -> list[str]:
    """`command` at niceness `nice` in a session (and scheduler autogroup) of its own. With autogroup
    scheduling (Debian's default) nice only ranks tasks within one session, so the new session's
    autogroup gets the same nice value and then also counts against other sessions' processes."""
    return ["setsid", "-w", "sh", "-c", 'echo "$0" > /proc/$$/autogroup 2>/dev/null; exec nice -n "$0" "$@"',
            str(nice)] + [str(c) for c in command]


def fwq_command(output: str | os.PathLike, nsamples: int, *, quantum: str | None = None,
                work: int | None = None, mode: str = "mpi", threads_cpus: str | None = None,
                oversubscribe: bool = False, timer: str | None = None) -> list[str]:
    """The fwq-mpi / fwq-th command line (without launcher)."""
    if (quantum is None) == (work is None):
        raise StackproofError("give exactly one of quantum (e.g. '1.4ms') or work (loop iterations)")
    exe = binary("fwq-mpi" if mode == "mpi" else "fwq-th")
    cmd = [str(exe), "-n", str(nsamples), "-o", str(output), "-q"]
    cmd += ["--quantum", quantum] if quantum is not None else ["-w", str(work)]
    if mode != "mpi" and threads_cpus:
        cmd += ["--cpus", threads_cpus]
    if oversubscribe:
        cmd += ["--oversubscribe"]
    if timer:
        cmd += ["--timer", timer]
    return cmd


def run_fwq(output: str | os.PathLike, nsamples: int, *, launcher: list[str] | None = None,
            quantum: str | None = None, work: int | None = None, mode: str = "mpi",
            threads_cpus: str | None = None, nice: int | None = None, env: dict | None = None,
            timeout: float = 600, label: str = "", oversubscribe: bool = False,
            timer: str | None = None) -> Trace:
    """Run FWQ under `launcher` (default: none for threads mode, mpirun for all cores otherwise)
    and return the loaded trace. `nice` runs the whole launch at that niceness, in its own session
    and autogroup (e.g. -20 shields the measurement from co-tenant processes on a shared machine,
    while a SCHED_FIFO injector still preempts it)."""
    if launcher is None:
        launcher = [] if mode != "mpi" else mpirun_launcher(os.cpu_count() or 1)
    cmd = list(launcher) + fwq_command(output, nsamples, quantum=quantum, work=work, mode=mode,
                                       threads_cpus=threads_cpus, oversubscribe=oversubscribe, timer=timer)
    if nice is not None:
        cmd = shielded(cmd, nice)
    try:
        proc = subprocess.run(cmd, env=env or mpi_env(), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise StackproofError(f"fwq did not finish in {timeout:.0f} s: {' '.join(cmd)}") from None
    if proc.returncode != 0:
        raise StackproofError(f"fwq failed (exit {proc.returncode}): {' '.join(cmd)}\n{proc.stderr.strip()}")
    return load(output, label=label)


def _rt_runtime_of_cgroup(pid: int | str = "self", cgroup_root: Path = Path("/sys/fs/cgroup"),
                          proc: Path = Path("/proc")) -> tuple[str, int | None]:
    """(cgroup path, cpu.rt_runtime_us) of a process's cgroup-v1 cpu controller; None when the kernel
    has no RT group scheduling (no cpu.rt_runtime_us file) or the cgroup is gone."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return "", None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and "cpu" in parts[1].split(","):
            for mount in (cgroup_root / parts[1], cgroup_root / "cpu", cgroup_root / "cpu,cpuacct"):
                f = mount / parts[2].lstrip("/") / "cpu.rt_runtime_us"
                try:
                    return parts[2], int(f.read_text())
                except (OSError, ValueError):
                    continue
            return parts[2], None
    return "", None


def _can_rt_without_root(status_text: str) -> bool:
    """CAP_SYS_NICE (bit 23) in the effective set, or a non-zero RLIMIT_RTPRIO."""
    import resource
    for line in status_text.splitlines():
        if line.startswith("CapEff:"):
            if int(line.split()[1], 16) & (1 << 23):
                return True
    return resource.getrlimit(resource.RLIMIT_RTPRIO)[0] != 0


def fifo_refusal(errno_value: int, euid: int, pid: int | str = "self",
                 cgroup_root: Path = Path("/sys/fs/cgroup"), proc: Path = Path("/proc")) -> str:
    """Why SCHED_FIFO was refused, in words: not root (no CAP_SYS_NICE/RLIMIT_RTPRIO), or root in a
    cgroup without a real-time budget (cpu.rt_runtime_us = 0 with RT group scheduling), or other."""
    import errno as errno_mod
    name = errno_mod.errorcode.get(errno_value, str(errno_value))
    if errno_value == errno_mod.EPERM:
        path, budget = _rt_runtime_of_cgroup(pid, cgroup_root, proc)
        if budget == 0:
            return (f"EPERM: cgroup {path or '/'} has no real-time budget (cpu.rt_runtime_us = 0, RT group "
                    f"scheduling): give it one (echo N > cpu.rt_runtime_us, parents first) or run the injector "
                    f"outside it" + ("" if euid == 0 else "; and this is not root"))
        if euid != 0:
            try:
                status = (proc / str(pid) / "status").read_text()
            except OSError:
                status = ""
            if not _can_rt_without_root(status):
                return ("EPERM: not root: SCHED_FIFO needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO "
                        "(ulimit -r) above 0")
        return f"EPERM as uid {euid} for another reason (seccomp or a container's policy?)"
    return f"{name}: sched_setscheduler(SCHED_FIFO) failed"


class Injector:
    """A running fwq-noise (busy threads pinned to CPUs). Use as a context manager; `report` holds
    the achieved duty cycle etc. after exit. When SCHED_FIFO was asked for and refused, the report
    says so (`policy` is what really ran, `fifo_refused` the reason in words, `degraded` True) and
    a warning is printed; with require_fifo=True stop() raises instead.

        with Injector(freq_hz=10, duration="2500us", cpus="0") as inj:
            run_fwq(...)
        print(inj.report["duty_cycle"])
    """

    def __init__(self, freq_hz: float, duration: str, cpus: str, *, scaled: bool = False,
                 sync: bool = False, policy: str = "fifo", seconds: float | None = None,
                 cores: int | None = None, seed: int | None = None, floating: bool = False,
                 require_fifo: bool = False):
        self.require_fifo = require_fifo
        self.args = [str(binary("fwq-noise")), "--freq", str(freq_hz), "--duration", duration,
                     "--cpus", cpus, "--policy", policy]
        if scaled:
            self.args.append("--scaled")
        if sync:
            self.args.append("--sync")
        if floating:  # not pinned: the OS places the noise (the FreeCore situation)
            self.args.append("--float")
        if seconds:
            self.args += ["--seconds", str(seconds)]
        if cores:
            self.args += ["--cores", str(cores)]
        if seed is not None:
            self.args += ["--seed", str(seed)]
        self.proc: subprocess.Popen | None = None
        self.report: dict | None = None
        self._dir = None

    def start(self) -> "Injector":
        self._dir = tempfile.TemporaryDirectory(prefix="fwq-noise-")
        self._report_path = Path(self._dir.name) / "report.json"
        self.proc = subprocess.Popen(self.args + ["--report", str(self._report_path)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(0.05)
        if self.proc.poll() is not None:  # bad arguments: it exits at once with a message
            err = self.proc.stderr.read().strip()
            raise StackproofError(f"fwq-noise failed (exit {self.proc.returncode}): {err}")
        return self

    def stop(self) -> dict:
        if self.proc is None:
            raise StackproofError("injector was not started")
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        try:
            self.report = json.loads(self._report_path.read_text())
        except (OSError, ValueError):
            raise StackproofError(f"fwq-noise wrote no report (exit {self.proc.returncode}): {err.strip()}") from None
        finally:
            self._dir.cleanup()
        self._check_policy()
        return self.report

    def _check_policy(self) -> None:
        """Mark a run that needed SCHED_FIFO and did not get it, with the reason in words."""
        r = self.report
        wanted = r.get("policy_requested", "fifo" if "--policy" in self.args and
                       self.args[self.args.index("--policy") + 1] == "fifo" else "other")
        r["policy_requested"] = wanted
        r["degraded"] = wanted == "fifo" and r.get("policy") != "fifo"
        if not r["degraded"]:
            return
        reason = fifo_refusal(int(r.get("fifo_errno") or 1), int(r.get("euid", os.geteuid())))
        r["fifo_refused"] = reason
        msg = f"noise injector: SCHED_FIFO refused, bursts ran at SCHED_OTHER ({reason})"
        if self.require_fifo:
            raise StackproofError(msg)
        print(f"warning: {msg}", file=sys.stderr)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def selfish_env(freq_hz: float, duration: str, ranks: str = "all", offset: str | None = None,
                report: str | None = None, base: dict | None = None) -> dict:
    """Environment that makes every MPI rank in `ranks` load libfwq-selfish.so (SIGALRM noise).
    Open MPI passes the environment of mpirun to local ranks; with srun use --export=ALL."""
    env = dict(base if base is not None else mpi_env())
    lib = str(binary("libfwq-selfish.so"))
    env["LD_PRELOAD"] = f"{lib}:{env['LD_PRELOAD']}" if env.get("LD_PRELOAD") else lib
    env.update({"STACKPROOF_SELFISH_FREQ": str(freq_hz), "STACKPROOF_SELFISH_DURATION": duration,
                "STACKPROOF_SELFISH_RANKS": ranks})
    if offset:
        env["STACKPROOF_SELFISH_OFFSET"] = offset
    if report:
        env["STACKPROOF_SELFISH_REPORT"] = report
    return env
