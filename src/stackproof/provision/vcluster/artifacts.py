"""What a Warewulf server serves, built for the virtual cluster under <root>/http:

    vmlinuz                          kernel of the pinned Debian cloud kernel package
    kmods.img                        cpio: the virtio-net modules of that kernel
    images/<image>.img               cpio of the image's root filesystem, from the images/ OCI archive
    overlays/<node>/system.img       cpio: wwinit, hostname, hosts, munge, slurm, corespec
    overlays/<node>/runtime.img      cpio: vctools (MPI hello)
    ipxe/<mac>.ipxe, nodes.conf      the per-node iPXE scripts and the nodes.conf they come from

Kernel, image and MPI hello are rebuilt only when their inputs change (a JSON stamp of the inputs
next to each output); overlays are rewritten only when their bytes change.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
from importlib import resources
from pathlib import Path

from stackproof.files import sha256_of
from stackproof.errors import StackproofError
from stackproof.paths import REPO
from stackproof.provision import cpio
from stackproof.provision.vcluster.nodesconf import VNode
from stackproof.provision.vcluster.overlays import KMODS

# Debian 12's cloud kernel (virtio drivers as modules, small): pinned; bump both together.
KERNEL_PACKAGE = "linux-image-6.1.0-56-cloud-amd64"
KERNEL_VERSION = "6.1.192-2"
KERNEL_RELEASE = "6.1.0-56-cloud-amd64"
IMAGES_OUT = REPO / "build" / "images"
# Left out of the image cpio on top of the image's own /etc/warewulf/excludes: the node boots from
# RAM (the rootfs is a tmpfs), and compilers, headers, static libraries, build tools and locales are
# not needed to run jobs (MPI programs are built on the head). Saves ~330 MB of guest memory per node.
VC_EXCLUDES = ["/usr/lib/gcc/", "/usr/include/", "/usr/share/locale/", "/usr/share/info/",
               "/usr/share/cmake-*/", "/usr/bin/cmake", "/usr/bin/ctest", "/usr/bin/cpack",
               "/usr/bin/x86_64-linux-gnu-lto-dump-*", "/usr/lib/x86_64-linux-gnu/*.a",
               "/usr/lib/x86_64-linux-gnu/lib[alt]san.so*", "/usr/lib/x86_64-linux-gnu/libubsan.so*",
               "/usr/lib/x86_64-linux-gnu/perl/*/CORE/", "/var/cache/", "/var/lib/apt/"]
# zstd: iPXE's HTTP download under TCG is the slow part of a boot (its rate: docs/performance.md), and
# the guest unpacks the plain and the zstd cpio in about the same time, so the 2.5x smaller archive
# boots faster.
IMAGE_COMPRESSION = "zstd"


def log(msg: str) -> None:
    print(f"vcluster: {msg}", flush=True)


def _stamp_ok(out: Path, inputs: dict) -> bool:
    stamp = out.with_name(out.name + ".inputs")
    try:
        return out.is_file() and json.loads(stamp.read_text()) == inputs
    except (OSError, ValueError):
        return False


def _stamp(out: Path, inputs: dict) -> None:
    out.with_name(out.name + ".inputs").write_text(json.dumps(inputs, indent=1, sort_keys=True) + "\n")


def sha256(path: Path) -> str:
    return sha256_of(path)


def write_if_changed(path: Path, data: bytes, mode: int = 0o644) -> bool:
    if path.is_file() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    # created with its final mode (a secret is never readable by others, not even for a moment),
    # never through a symlink left in its place
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    tmp.replace(path)
    return True


# ---- kernel ------------------------------------------------------------------------------------------

def kernel(root: Path) -> tuple[Path, Path]:
    """vmlinuz and kmods.img, from the pinned kernel package (apt-get download, never committed)."""
    http, cache = root / "http", root / "cache"
    vmlinuz, kmods = http / "vmlinuz", http / "kmods.img"
    inputs = {"package": KERNEL_PACKAGE, "version": KERNEL_VERSION, "modules": KMODS}
    if _stamp_ok(kmods, inputs) and vmlinuz.is_file():
        return vmlinuz, kmods
    cache.mkdir(parents=True, exist_ok=True)
    debs = sorted(cache.glob(f"{KERNEL_PACKAGE}_{KERNEL_VERSION.replace(':', '%3a')}_*.deb"))
    if not debs:
        log(f"apt-get download {KERNEL_PACKAGE}={KERNEL_VERSION}")
        download = ["apt-get", "download", f"{KERNEL_PACKAGE}={KERNEL_VERSION}"]
        proc = subprocess.run(download, cwd=cache, capture_output=True, text=True)
        if proc.returncode != 0 and "Unable to locate" in proc.stderr:
            # the host's package lists are gone (image builds clean them): fetch them once and retry
            log("apt package lists missing: apt-get update")
            subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=900", "update", "-qq"], capture_output=True)
            proc = subprocess.run(download, cwd=cache, capture_output=True, text=True)
        debs = sorted(cache.glob(f"{KERNEL_PACKAGE}_*.deb"))
        if proc.returncode != 0 or not debs:
            raise StackproofError(f"cannot download the guest kernel {KERNEL_PACKAGE}={KERNEL_VERSION} "
                                  f"(if Debian dropped it, bump KERNEL_* in "
                                  f"src/stackproof/provision/vcluster/artifacts.py): {proc.stderr.strip()[-300:]}")
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        subprocess.run(["dpkg-deb", "-x", str(debs[-1]), tmp], check=True)
        src = Path(tmp) / "boot" / f"vmlinuz-{KERNEL_RELEASE}"
        if not src.is_file():
            raise StackproofError(f"{debs[-1].name} has no boot/vmlinuz-{KERNEL_RELEASE}")
        http.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, vmlinuz)
        files = {}
        for rel in KMODS:
            ko = Path(tmp) / "lib" / "modules" / KERNEL_RELEASE / rel
            if not ko.is_file():
                raise StackproofError(f"{debs[-1].name} lacks module {rel}")
            files[f"usr/lib/modules/{KERNEL_RELEASE}/{rel}"] = cpio.File(ko.read_bytes())
        write_if_changed(kmods, cpio.to_bytes(cpio.overlay_entries(files)))
    _stamp(kmods, inputs)
    return vmlinuz, kmods


# ---- image -------------------------------------------------------------------------------------------

def oci_archive(image: str) -> Path:
    path = IMAGES_OUT / f"{image}.oci.tar"
    if not path.is_file():
        raise StackproofError(f"image {image!r}: {path} not found (build it first: make images-debian)")
    return path


def image_rel(name: str) -> str:
    """Where the image cpio is served, relative to http/."""
    return f"images/{name}.img" + (".zst" if IMAGE_COMPRESSION == "zstd" else "")


def image(root: Path, name: str) -> Path:
    """The OCI archive's root filesystem as a newc cpio (zstd-compressed when IMAGE_COMPRESSION says)."""
    src = oci_archive(name)
    out = root / "http" / image_rel(name)
    st = src.stat()
    inputs = {"archive": str(src), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "excludes": VC_EXCLUDES,
              "compression": IMAGE_COMPRESSION, "writer": sha256(Path(cpio.__file__))}
    if _stamp_ok(out, inputs):
        return out
    zstd = ["zstd", "-3", "-T0", "-q", "-c"] if IMAGE_COMPRESSION == "zstd" else None
    if zstd and not shutil.which("zstd"):
        raise StackproofError("zstd not found: apt-get install zstd")
    out.parent.mkdir(parents=True, exist_ok=True)
    for old in out.parent.glob(f"{name}.img*"):
        old.unlink()
    t0 = time.monotonic()
    log(f"packing image {name} ({st.st_size >> 20} MB OCI archive) into {out.name}")
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "wb") as fh:
        if zstd:
            proc = subprocess.Popen(zstd, stdin=subprocess.PIPE, stdout=fh)
            try:
                n = cpio.write(proc.stdin, cpio.oci_rootfs_entries(str(src), VC_EXCLUDES))
            finally:
                proc.stdin.close()
                if proc.wait() != 0:
                    raise StackproofError(f"zstd failed packing {out}")
        else:
            n = cpio.write(fh, cpio.oci_rootfs_entries(str(src), VC_EXCLUDES))
    tmp.replace(out)
    _stamp(out, inputs)
    log(f"image {name}: {n} entries, {out.stat().st_size >> 20} MB, {time.monotonic() - t0:.0f} s")
    return out


# ---- MPI hello -----------------------------------------------------------------------------------------

def mpi_hello(root: Path) -> bytes | None:
    """Built on the head with its mpicc (same Debian Open MPI as the image); None without mpicc."""
    src = resources.files("stackproof.provision.vcluster").joinpath("data/mpi_hello.c")
    out = root / "cache" / "mpi-hello"
    inputs = {"source": hashlib.sha256(src.read_bytes()).hexdigest()}
    if _stamp_ok(out, inputs):
        return out.read_bytes()
    mpicc = shutil.which("mpicc")
    if not mpicc:
        log("mpicc not found on the head: no MPI hello on the nodes (apt-get install libopenmpi-dev)")
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        c = Path(tmp) / "mpi_hello.c"
        c.write_bytes(src.read_bytes())
        proc = subprocess.run([mpicc, "-O2", "-o", str(out), str(c)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise StackproofError(f"mpicc failed: {proc.stderr.strip()[-300:]}")
    _stamp(out, inputs)
    return out.read_bytes()


# ---- overlays and boot scripts ---------------------------------------------------------------------------

def overlays(root: Path, rendered: dict[str, dict[str, dict[str, cpio.File]]], dirs: dict) -> None:
    for node, parts in rendered.items():
        for part, files in parts.items():
            data = cpio.to_bytes(cpio.overlay_entries(files, dirs))
            # the system overlay carries the munge key: only root reads it (the HTTP server runs as
            # root and hands a node's overlays to that node's address alone, httpserve.py)
            write_if_changed(root / "http" / "overlays" / node / f"{part}.img", data, 0o400)


def boot_files(root: Path, runtime: Path, nodes: list[VNode], nodes_conf_text: str, boot_script: str,
               node_script) -> Path:
    """http/nodes.conf, http/ipxe/<mac>.ipxe, and the TFTP root (boot.ipxe) under `runtime`: a
    root-owned world-traversable directory outside the checkout (head.runtime_dir), because dnsmasq
    reads it as `nobody`, who cannot traverse a 0700 home or mktemp -d holding the checkout."""
    http = root / "http"
    write_if_changed(http / "nodes.conf", nodes_conf_text.encode())
    keep = set()
    for n in nodes:
        name = n.hwaddr.replace(":", "-") + ".ipxe"
        keep.add(name)
        write_if_changed(http / "ipxe" / name, node_script(n).encode())
    for old in (http / "ipxe").glob("*.ipxe"):
        if old.name not in keep:
            old.unlink()
    tftp = runtime / "tftp"
    tftp.mkdir(mode=0o755, exist_ok=True)
    write_if_changed(tftp / "boot.ipxe", boot_script.encode())
    # dnsmasq drops to nobody for TFTP: world-readable files and directory
    os.chmod(tftp, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return tftp
