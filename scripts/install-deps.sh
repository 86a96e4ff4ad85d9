#!/usr/bin/env bash
# Install the Debian 12 packages and Python packages stackproof needs.
# Idempotent: packages already present are skipped, so a second run takes about a second.
set -euo pipefail

APT_PACKAGES=(
  # Slurm 22.05 test cluster (libpmix2 is not pulled in by the pmix plugin: list it)
  munge slurmctld slurmd slurm-client libslurm-dev libpmix2
  # MPI stacks used on the test cluster
  openmpi-bin libopenmpi-dev mpich libmpich-dev
  # topology and binding
  hwloc libhwloc-dev
  # build tools for mpibind and fwq-mpi
  gcc g++ libc6-dev make cmake pkg-config
  # namespaces, process tools, core-specialization tools
  iproute2 procps util-linux tuna irqbalance
  python3-venv
  # Debian's own python3 runs stackproof.stacks in the hostile tests (tests/test_attacker_hostile.py):
  # both interpreters a machine may use for `stack build` are tested; recipes are YAML
  python3-yaml
  # lint of the shell scripts we install on nodes (stackproof-corespec)
  shellcheck
  # software stacks (stackproof stack build): BLAS/LAPACK for commodity stacks, Fortran for the wrappers
  # (NetPIPE comes from Debian's netpipe source package: see the deb-src entry below)
  libopenblas-dev gfortran
)

# install-deps.sh --upgrade PKG...: bring these installed packages to the archive's current versions
# (make stacks passes the build toolchain that `stackproof stack toolchain --outdated` names: the
# node images get the current versions, so the host's benchmark builds and theirs share one key)
if [ "${1:-}" = --upgrade ]; then
  shift
  [ $# -gt 0 ] || exit 0
  [ "$(id -u)" -eq 0 ] || { echo "install-deps: must run as root to upgrade $*" >&2; exit 1; }
  echo "install-deps: the build toolchain at the archive's versions: apt-get install --only-upgrade $*"
  log=$(mktemp /tmp/install-deps.XXXXXX.log)
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -q --only-upgrade \
    --no-install-recommends "$@" >"$log" 2>&1 \
    || { echo "install-deps: apt-get install --only-upgrade failed; its last lines (full log: $log):" >&2
         tail -n 20 "$log" | sed 's/^/  /' >&2; exit 1; }
  rm -f "$log"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: must run as root (apt-get)" >&2
  exit 1
fi


# deb-src entries mirroring the system's debian.sources, so `apt-get source netpipe` works
# (stackproof stack build compiles NetPIPE from Debian's source package for every MPI stack)
DEB_SRC=/etc/apt/sources.list.d/stackproof-deb-src.sources
NEED_UPDATE=0
if [ ! -e "$DEB_SRC" ] && [ -f /etc/apt/sources.list.d/debian.sources ] \
   && ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "install-deps: adding deb-src entries ($DEB_SRC)"
  sed 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/debian.sources > "$DEB_SRC"
  NEED_UPDATE=1
fi
# package or source lists never fetched (or cleaned, as image builds do): fetch them, so later steps
# (apt-get source netpipe, apt-get download of the vcluster's guest kernel) find their packages
if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null \
   || { [ -e "$DEB_SRC" ] && ! compgen -G '/var/lib/apt/lists/*_source_Sources*' >/dev/null; }; then
  NEED_UPDATE=1
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${#missing[@]} packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # apt's full output goes to a log; on failure its last lines (the real error) are shown.
  aptlog=$(mktemp /tmp/install-deps.XXXXXX.log)
  apt_run() {
    local rc=0
    apt-get -o DPkg::Lock::Timeout=900 "$@" >"$aptlog" 2>&1 || rc=$?
    grep -E '^(Setting up|Unpacking)' "$aptlog" | sed 's/^/  /' || true
    if [ "$rc" -ne 0 ]; then
      echo "install-deps: apt-get $1 failed (exit $rc); its last lines (full log: $aptlog):" >&2
      tail -n 20 "$aptlog" | sed 's/^/  /' >&2
      exit 1
    fi
  }
  apt_run update -q
  apt_run install -y -q --no-install-recommends "${missing[@]}"
  for p in "${missing[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
      || { echo "install-deps: package $p is not installed after apt-get (log: $aptlog)" >&2; exit 1; }
  done
  rm -f "$aptlog"
else
  echo "install-deps: all ${#APT_PACKAGES[@]} Debian packages present"
  if [ "$NEED_UPDATE" = 1 ]; then apt-get -o DPkg::Lock::Timeout=900 update -qq; fi
fi
