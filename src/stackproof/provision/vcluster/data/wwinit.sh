#!/bin/sh
# vcluster "wwinit" system overlay: /init of a node booted with root=initramfs, the part of Warewulf's
# wwinit overlay a virtual node needs. The kernel has unpacked image + kmods + overlays into the
# rootfs; /warewulf/config (rendered from nodes.conf) names this node. Load the NIC driver, give
# eth0 its nodes.conf address, then hand over to the image's init (systemd) with munge + slurmd.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
# shellcheck source=/dev/null
. /warewulf/config
echo "vcluster: wwinit $WWHOSTNAME $WWIPADDR/$WWPREFIX"
for m in $WWKMODS; do
  insmod "/lib/modules/$(uname -r)/$m" || echo "vcluster: insmod $m failed"
done
i=0
while [ ! -e "/sys/class/net/$WWDEVICE" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "/sys/class/net/$WWDEVICE" ] || echo "vcluster: no $WWDEVICE after 10 s"
hostname "$WWHOSTNAME"
ip link set lo up
ip link set "$WWDEVICE" up
ip addr add "$WWIPADDR/$WWPREFIX" dev "$WWDEVICE"
[ -n "$WWGATEWAY" ] && ip route add default via "$WWGATEWAY"
echo "vcluster: network up"
exec "$WWINIT" "$@"
