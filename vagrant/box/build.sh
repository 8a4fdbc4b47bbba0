#!/bin/bash
# Build the Vagrant lab's box: Debian 12 for vagrant-libvirt, from Debian packages only, with
# everything a node runs already installed (vagrant/node-packages), so that VMs without
# internet can be provisioned. Run as root (mmdebstrap, chroot):
#
#   vagrant/box/build.sh vagrant/.box/kubelab-debian12.box
#
# Why it is built this way (measured on a host whose kernel has no partition support on loop
# devices, see vagrant/README.md):
# - the root filesystem is made by `mkfs.ext4 -d` straight into the partition's offset of a raw
#   disk image, never mounted; GRUB is put on the disk with dd (boot.img in the MBR, core.img
#   from sector 1) instead of grub-install, which needs the partition as a device, and its
#   modules are copied into /boot/grub, where core.img looks for them;
# - mmdebstrap copies the build host's resolv.conf and hostname: both are replaced (a stale
#   resolver, and `sudo: unable to resolve host` without the box's name in /etc/hosts);
# - SSH host keys are made at first boot, so every VM has its own;
# - a serial console (libvirt keeps its log) and systemd-networkd with a catch-all DHCP file
#   that sorts after Vagrant's own network files, so Vagrant's private network wins.
set -euo pipefail

readonly OUT=${1:?usage: build.sh OUT.box}
HERE=$(cd "$(dirname "$0")" && pwd)
readonly HERE
readonly SUITE=bookworm
readonly DISK_GB=20
readonly PART_OFFSET=1048576 # the partition starts at sector 2048; GRUB's core.img fits before
readonly BOX_HOSTNAME=kubelab
readonly BASE_PACKAGES=(
  systemd-sysv udev dbus libpam-systemd openssh-server sudo ca-certificates
  linux-image-cloud-amd64 grub-pc e2fsprogs netbase procps kmod less
)

log() { echo "kubelab box: $*"; }

vagrant_public_key() {
  local key
  for key in /usr/share/rubygems-integration/all/gems/vagrant-*/keys/vagrant.pub \
    /opt/vagrant/embedded/gems/gems/vagrant-*/keys/vagrant.pub; do
    if [ -f "$key" ]; then
      cat "$key"
      return
    fi
  done
  echo "build.sh: no vagrant.pub (Vagrant's insecure key) found; is vagrant installed?" >&2
  exit 1
}

node_packages() {
  grep -v -e '^#' -e '^$' "$HERE/../node-packages"
}

# The box's own files, written into the unpacked root filesystem.
customize() {
  local root=$1 kernel
  echo "$BOX_HOSTNAME" >"$root/etc/hostname"
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' \
    "$BOX_HOSTNAME" >"$root/etc/hosts"
  rm -f "$root/etc/resolv.conf"
  echo 'LABEL=root / ext4 errors=remount-ro 0 1' >"$root/etc/fstab"

  install -m 0644 "$HERE/99-kubelab-dhcp.network" "$root/etc/systemd/network/"
  install -m 0644 "$HERE/kubelab-ssh-hostkeys.service" "$root/etc/systemd/system/"
  install -m 0644 "$HERE/sshd-vagrant.conf" "$root/etc/ssh/sshd_config.d/vagrant.conf"
  rm -f "$root"/etc/ssh/ssh_host_*
  systemctl --root="$root" enable systemd-networkd.service kubelab-ssh-hostkeys.service

  chroot "$root" useradd --create-home --shell /bin/bash vagrant
  echo 'vagrant:vagrant' | chroot "$root" chpasswd
  echo 'vagrant ALL=(ALL) NOPASSWD: ALL' >"$root/etc/sudoers.d/vagrant"
  chmod 0440 "$root/etc/sudoers.d/vagrant"
  install -d -m 0700 "$root/home/vagrant/.ssh"
  vagrant_public_key >"$root/home/vagrant/.ssh/authorized_keys"
  chmod 0600 "$root/home/vagrant/.ssh/authorized_keys"
  chroot "$root" chown -R vagrant:vagrant /home/vagrant/.ssh

  kernel=$(basename "$(find "$root/boot" -name 'vmlinuz-*' | sort -V | tail -1)")
  kernel=${kernel#vmlinuz-}
  cp -a "$root/usr/lib/grub/i386-pc" "$root/boot/grub/"
  sed "s/@KERNEL@/$kernel/g" "$HERE/grub.cfg" >"$root/boot/grub/grub.cfg"
  chroot "$root" grub-mkimage -O i386-pc -o /boot/grub/core.img \
    -p '(hd0,msdos1)/boot/grub' biosdisk part_msdos ext2 search search_label
  mv "$root/boot/grub/core.img" "$work/core.img"
  cp "$root/usr/lib/grub/i386-pc/boot.img" "$work/boot.img"
}

# A raw disk: one partition at sector 2048 holding the root filesystem, GRUB before it.
make_disk() {
  local root=$1 disk=$2
  truncate -s "${DISK_GB}G" "$disk"
  echo "start=$((PART_OFFSET / 512)), type=83, bootable" | sfdisk --quiet "$disk"
  mkfs.ext4 -q -L root -E "offset=$PART_OFFSET" -d "$root" "$disk" \
    "$((DISK_GB * 1024 - PART_OFFSET / 1048576))M"
  dd if="$work/boot.img" of="$disk" bs=440 count=1 conv=notrunc status=none
  dd if="$work/core.img" of="$disk" bs=512 seek=1 conv=notrunc status=none
}

if [ "$(id -u)" -ne 0 ]; then
  echo "build.sh: run as root (mmdebstrap and chroot)" >&2
  exit 1
fi
work=$(mktemp -d /var/tmp/kubelab-box.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/rootfs" "$work/box"

log "root filesystem (mmdebstrap, $SUITE)"
mapfile -t packages < <(node_packages)
packages+=("${BASE_PACKAGES[@]}")
mmdebstrap --variant=minbase --quiet --include="$(
  IFS=,
  echo "${packages[*]}"
)" --dpkgopt=force-unsafe-io "$SUITE" "$work/rootfs"

log "users, network, console, boot loader"
customize "$work/rootfs"

log "disk image"
make_disk "$work/rootfs" "$work/disk.raw"
rm -rf "$work/rootfs"
qemu-img convert -c -O qcow2 "$work/disk.raw" "$work/box/box.img"
rm -f "$work/disk.raw"
printf '{"provider": "libvirt", "format": "qcow2", "virtual_size": %d}\n' "$DISK_GB" \
  >"$work/box/metadata.json"
install -m 0644 "$HERE/Vagrantfile" "$work/box/Vagrantfile"

mkdir -p "$(dirname "$OUT")"
tar -C "$work/box" -cf "$OUT.tmp" metadata.json Vagrantfile box.img
mv "$OUT.tmp" "$OUT"
log "$OUT ($(du -h "$OUT" | cut -f1)) in ${SECONDS}s"
