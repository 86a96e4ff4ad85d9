#!/bin/sh
# The install steps every stackproof node image shares (el9-compute, el9-compute-gpu, debian12-compute
# and the laptop image): which distribution packages, which of our components, the system side of
# the core-specialization profiles, and the scrub that keeps secrets out of images.
#
#   install-stack.sh packages DISTRO [gpu]      print the package list (el9 | debian12)
#   install-stack.sh users                      munge/slurm accounts with fixed ids (before packages)
#   install-stack.sh install-packages DISTRO [gpu]
#   install-stack.sh require-view DIR           fail clearly unless DIR is a Spack view
#   install-stack.sh components SRC PREFIX      build mpibind (+ SPANK plugin) and FWQ from SRC; pip install
#                                               stackproof (SRC) into PREFIX/venv
#   install-stack.sh system-side                directories, services, profile tooling
#   install-stack.sh scrub                      delete munge keys, SSH host keys, machine-id, caches
#   install-stack.sh manifest FILE              packages and versions, plus our components
set -eu

# Fixed ids so the munge overlay can chown the key (images/warewulf/install-overlays.sh uses them).
MUNGE_ID=970
SLURM_ID=971

die() { echo "install-stack: error: $*" >&2; exit 1; }

packages() {
  case "$1" in
  el9)
    # warewulf-node-images rockylinux-9 base, then the stack (slurm and munge from EPEL)
    echo coreutils cpio e2fsprogs ethtool findutils initscripts iproute kernel-core kernel-modules \
      net-tools NetworkManager nfs-utils openssh-clients openssh-server pciutils psmisc rsync \
      rsyslog which \
      munge slurm-slurmd slurm-devel slurm-pam_slurm hwloc hwloc-devel irqbalance tuna procps-ng \
      util-linux openmpi openmpi-devel gcc make cmake pkgconf-pkg-config \
      python3.11 python3.11-pyyaml python3.11-numpy python3.11-pip python3.11-setuptools python3.11-wheel
    [ "${2:-}" = gpu ] && echo nvidia-driver nvidia-driver-cuda datacenter-gpu-manager
    ;;
  debian12)
    # minbase + what a compute node runs + what builds our components and the smoke's MPI hello
    # (slurmctld: the laptop image, built on this one, runs the whole test cluster; dbus: slurmd's
    # cgroup/v2 plugin asks systemd over D-Bus for the slurmstepd scope, without it slurmd exits)
    echo systemd-sysv dbus kmod iproute2 procps util-linux openssh-server \
      munge slurmd slurmctld slurm-client libslurm-dev libpmix2 \
      openmpi-bin libopenmpi-dev hwloc libhwloc-dev \
      gcc libc6-dev make cmake pkg-config \
      irqbalance tuna python3 python3-yaml python3-numpy python3-venv python3-wheel
    [ "${2:-}" = gpu ] && echo nvidia-driver nvidia-smi
    ;;
  *) die "unknown distribution '$1' (el9 | debian12)" ;;
  esac
  return 0
}

users() {
  if command -v useradd >/dev/null 2>&1; then
    getent group munge >/dev/null || groupadd -r -g "$MUNGE_ID" munge
    getent passwd munge >/dev/null || useradd -r -u "$MUNGE_ID" -g munge -d /var/lib/munge -s /sbin/nologin munge
    getent group slurm >/dev/null || groupadd -r -g "$SLURM_ID" slurm
    getent passwd slurm >/dev/null || useradd -r -u "$SLURM_ID" -g slurm -d /var/lib/slurm -s /sbin/nologin slurm
  else
    # mmdebstrap's essential stage has base-passwd but not passwd (useradd): write the entries
    for u in "munge:$MUNGE_ID:/var/lib/munge" "slurm:$SLURM_ID:/var/lib/slurm"; do
      n=${u%%:*} id=${u#*:}; home=${id#*:}; id=${id%%:*}
      grep -q "^$n:" /etc/group || echo "$n:x:$id:" >> /etc/group
      grep -q "^$n:" /etc/passwd || echo "$n:x:$id:$id::$home:/usr/sbin/nologin" >> /etc/passwd
      if [ -e /etc/shadow ] && ! grep -q "^$n:" /etc/shadow; then echo "$n:!:1::::::" >> /etc/shadow; fi
    done
  fi
}

install_packages() {
  # shellcheck disable=SC2046  # the list is meant to split into words
  case "$1" in
  el9)
    dnf install -y epel-release dnf-plugins-core
    dnf config-manager --set-enabled crb
    [ "${2:-}" = gpu ] && dnf config-manager --add-repo \
      "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/$(arch)/cuda-rhel9.repo"
    dnf install -y --allowerasing $(packages "$@")
    dnf remove -y selinux-policy || true
    ;;
  debian12)
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends $(packages "$@")
    ;;
  *) die "unknown distribution '$1'" ;;
  esac
}

require_view() {
  { [ -d "$1/bin" ] && [ -d "$1/lib" ]; } || die "Spack view not found at $1 (no bin/ and lib/): build the \
container environment first (spack-envs/container, see docs/images.md) and pass its image as \
--build-arg SPACK_IMAGE=..."
  [ -x "$1/bin/mpicc" ] || die "Spack view $1 has no bin/mpicc: the container environment must include openmpi"
  echo "install-stack: Spack view $1 ok"
}

components() {
  src=$1 prefix=$2
  for f in mpibind/CMakeLists.txt fwq/CMakeLists.txt pyproject.toml setup.py src/stackproof/cli.py slurm-conf/profiles.yaml; do
    [ -f "$src/$f" ] || die "missing $src/$f: the image needs the stackproof source tree (mpibind, fwq, src, slurm-conf, ...)"
  done
  build=$(mktemp -d)
  # hwloc >= 2.5 for mpibind: the distribution's (Debian) or the Spack view's (EL9 ships 2.4)
  cmake -S "$src/mpibind" -B "$build/mpibind" -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_RPATH="$prefix/lib"
  cmake --build "$build/mpibind" -j "$(nproc)"
  cmake --install "$build/mpibind"
  [ -f "$prefix/lib/mpibind/mpibind_slurm.so" ] || die "the mpibind SPANK plugin was not built (slurm/spank.h missing?)"
  cmake -S "$src/fwq" -B "$build/fwq" -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build/fwq" -j "$(nproc)"
  cmake --install "$build/fwq"
  [ -x "$prefix/bin/fwq-mpi" ] || die "fwq-mpi was not built (MPI not found by CMake?)"
  # stackproof: a normal (non-editable) pip install of the source tree, offline, into a venv that sees
  # the distribution's PyYAML/numpy (and setuptools/wheel to build it); the data it reads at run time
  # (slurm-conf/, reframe-tests/, images/, ...) lands in $prefix/venv/share/stackproof (setup.py)
  python=python3
  command -v python3.11 >/dev/null 2>&1 && python=python3.11
  "$python" -m venv --system-site-packages "$prefix/venv"
  # --force-reinstall: a venv that holds the same version from an older tree (the laptop layer) gets this one
  "$prefix/venv/bin/python" -m pip install --force-reinstall --no-deps --no-build-isolation --no-index \
    --no-cache-dir --disable-pip-version-check "$src"
  ln -sf "$prefix/venv/bin/stackproof" /usr/local/bin/stackproof
  for tool in mpibind fwq-mpi fwq-th fwq-noise; do ln -sf "$prefix/bin/$tool" "/usr/local/bin/$tool"; done
  rm -rf "$build"
  /usr/local/bin/stackproof --version
}

system_side() {
  install -d -m 0755 /etc/slurm /etc/stackproof /var/log/slurm /var/spool/slurmd
  install -d -m 0700 -o munge -g munge /etc/munge
  chown slurm:slurm /var/log/slurm
  # The profile's files (drop-ins, irqbalance, CpuSpecList) come from the Warewulf overlays at boot;
  # for images booted without Warewulf, `stackproof slurm render ... -o /` writes the same files.
  if command -v systemctl >/dev/null 2>&1; then
    systemctl enable munge.service slurmd.service >/dev/null 2>&1 || true
  fi
}

scrub() {
  # Secrets are made at provision time (Warewulf munge and ssh.host_keys overlays), never in images.
  # Debian's munge and openssh-server postinst scripts create both: delete them here.
  rm -f /etc/munge/munge.key /etc/ssh/ssh_host_*
  rm -f /var/lib/dbus/machine-id
  if [ -e /etc/machine-id ]; then : > /etc/machine-id; fi
  if command -v apt-get >/dev/null 2>&1; then apt-get clean; rm -rf /var/lib/apt/lists/*; fi
  if command -v dnf >/dev/null 2>&1; then dnf clean all; fi
  rm -rf /tmp/* /var/tmp/* /root/.cache
}

manifest() {
  {
    echo "# stackproof image manifest: package version"
    if command -v dpkg-query >/dev/null 2>&1; then
      dpkg-query -W -f '${Package} ${Version}\n'
    else
      rpm -qa --qf '%{NAME} %{VERSION}-%{RELEASE}\n'
    fi | sort
    for tool in mpibind fwq-mpi; do
      p=$(command -v "$tool" || true)
      [ -n "$p" ] && echo "stackproof-component $tool $(readlink -f "$p")"
    done
    command -v stackproof >/dev/null 2>&1 && echo "stackproof-component $(stackproof --version)"
    command -v reframe >/dev/null 2>&1 && echo "stackproof-component reframe $(reframe --version)"
    # stacks installed in the image (the laptop image): pip stacks' wheels, every benchmark's source
    for f in /opt/stackproof/stacks/*/stackproof-manifest.json /opt/stackproof/stacks/*/bench/provenance.json; do
      [ -f "$f" ] || continue
      python3 - "$f" <<'PY'
import json, sys
path = sys.argv[1]
doc = json.load(open(path))
if path.endswith("stackproof-manifest.json"):
    for name, version in sorted(doc.get("installed", {}).items()):
        print(f"stackproof-stack {doc.get('stack')} {name} {version}")
else:
    for key, rec in sorted(doc.items()):
        print(f"stackproof-bench {rec.get('stack')} {key} {rec.get('version')} sha256:{rec.get('sha256')} "
              f"{rec.get('source')}")
PY
    done
  } > "$1"
  echo "install-stack: wrote manifest $1 ($(wc -l < "$1") lines)"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
packages) [ $# -ge 1 ] || die "usage: packages DISTRO [gpu]"; list=$(packages "$@"); echo "$list" | tr ' ' '\n' | sed '/^$/d' ;;
users) users ;;
install-packages) [ $# -ge 1 ] || die "usage: install-packages DISTRO [gpu]"; install_packages "$@" ;;
require-view) [ $# -eq 1 ] || die "usage: require-view DIR"; require_view "$1" ;;
components) [ $# -eq 2 ] || die "usage: components SRC PREFIX"; components "$1" "$2" ;;
system-side) system_side ;;
scrub) scrub ;;
manifest) [ $# -eq 1 ] || die "usage: manifest FILE"; manifest "$1" ;;
*) die "usage: install-stack.sh packages|users|install-packages|require-view|components|system-side|scrub|manifest ..." ;;
esac
