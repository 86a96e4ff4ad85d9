#!/bin/sh
# Source me: podman/buildah settings that work as root on a host without systemd and with cgroup v1
# hybrid (notes/containers.md): storage under $IMAGES_STATE, runc with cgroupfs, ulimits at or below
# the host's, no network namespace setup. Nothing outside $IMAGES_STATE is touched.
# Storage driver: the kernel's overlay where the storage directory can hold it (an upper layer per
# container and per build step: a `podman run` of the 3 GB laptop image starts in 0.3 s here), else
# vfs (a full copy of the rootfs per layer and per container: 14 s per `podman run` of the 0.9 GB
# node image here). IMAGES_STORAGE_DRIVER=vfs|overlay forces one. Each driver has its own store.
IMAGES_STATE=${IMAGES_STATE:?set IMAGES_STATE to a directory for podman storage}
mkdir -p "$IMAGES_STATE"
if [ -z "${IMAGES_STORAGE_DRIVER:-}" ]; then
  IMAGES_STORAGE_DRIVER=vfs
  # overlay on overlay, tmpfs-backed or network file systems is refused or slow: only on a local disk fs
  case "$(stat -f -c %T "$IMAGES_STATE" 2>/dev/null)" in
  ext2/ext3|ext4|xfs|btrfs)
    grep -qw overlay /proc/filesystems 2>/dev/null && IMAGES_STORAGE_DRIVER=overlay ;;
  esac
fi
case "$IMAGES_STORAGE_DRIVER" in
vfs) graph=graph ;;                         # the store's name before overlay was used
overlay) graph="graph-overlay" ;;
*) echo "podman-env: IMAGES_STORAGE_DRIVER must be vfs or overlay (got '$IMAGES_STORAGE_DRIVER')" >&2; return 2 ;;
esac
mkdir -p "$IMAGES_STATE/$graph" "$IMAGES_STATE/run-$graph"
cat > "$IMAGES_STATE/storage.conf" <<CONF
[storage]
driver = "$IMAGES_STORAGE_DRIVER"
runroot = "$IMAGES_STATE/run-$graph"
graphroot = "$IMAGES_STATE/$graph"
CONF
cat > "$IMAGES_STATE/containers.conf" <<'CONF'
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
netns = "none"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
CONTAINERS_STORAGE_CONF="$IMAGES_STATE/storage.conf"
CONTAINERS_CONF="$IMAGES_STATE/containers.conf"
export CONTAINERS_STORAGE_CONF CONTAINERS_CONF IMAGES_STORAGE_DRIVER
