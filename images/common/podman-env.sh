#!/bin/sh
# Source me: podman/buildah settings that work as root on a host without systemd and with cgroup v1
# hybrid (notes/containers.md): vfs storage under $IMAGES_STATE, runc with cgroupfs, ulimits at or
# below the host's, no network namespace setup. Nothing outside $IMAGES_STATE is touched.
IMAGES_STATE=${IMAGES_STATE:?set IMAGES_STATE to a directory for podman storage}
mkdir -p "$IMAGES_STATE/graph" "$IMAGES_STATE/run"
cat > "$IMAGES_STATE/storage.conf" <<CONF
[storage]
driver = "vfs"
runroot = "$IMAGES_STATE/run"
graphroot = "$IMAGES_STATE/graph"
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
export CONTAINERS_STORAGE_CONF CONTAINERS_CONF
