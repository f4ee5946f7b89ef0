#!/bin/bash -eu
# Boots one mock host. Runs as PID 1 of a fresh pid namespace, started by labctl.py (or by the fake pct
# for a container) as:
#   nsenter --net=NETNS_FILE unshare --pid --mount --uts --ipc --cgroup --fork hostboot.sh NAME MNT SEED CHECKOUT LABDIR [GPUS]
# NAME      hostname
# MNT       directory for this host's mounts (rw tmpfs + merged overlay), in the caller's mount view
# SEED      directory tree copied over the new root (hostname, keys, unit masks, fakes, configs)
# CHECKOUT  the collection checkout, bind-mounted read-only at the same path
# LABDIR    the lab state dir, bind-mounted (rbind) at the same path
# GPUS      "mknod:N" (N fake nodes c 1 3) | "bind" (bind the caller's /dev/nvidia* = passthrough) | "none"
# Env: LAB_CONTAINER (systemd's container= value), LAB_SHARE (space separated dirs bound from the caller).
#
# NEVER boot systemd without the overlay root: this script aborts (set -e) before exec if any step fails.
set -euo pipefail
NAME=$1; MNT=$2; SEED=$3; CHECKOUT=$4; LABDIR=$5; GPUS=${6:-none}
[ "$$" = 1 ] || { echo "hostboot: must run as PID 1 of a new pid namespace" >&2; exit 1; }

mount --make-rprivate /
mkdir -p "$MNT/rw" "$MNT/merged"
mount -t tmpfs -o mode=755 "lab-$NAME-rw" "$MNT/rw"
mkdir -p "$MNT/rw/upper" "$MNT/rw/work"
mount -t overlay "lab-$NAME-root" -o "lowerdir=/,upperdir=$MNT/rw/upper,workdir=$MNT/rw/work" "$MNT/merged"
M=$MNT/merged
# the overlay must be in place before anything else is mounted or written
findmnt -n -o FSTYPE "$M" | grep -qx overlay

mount -t proc proc "$M/proc"
mount --bind "$M/proc/sys" "$M/proc/sys"; mount -o remount,bind,ro "$M/proc/sys"
mount --bind /dev/null "$M/proc/sysrq-trigger" 2>/dev/null || true
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$M/sys"
mount -t cgroup2 cgroup2 "$M/sys/fs/cgroup"
mount -t tmpfs -o mode=755,nosuid tmpfs "$M/run"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$M/tmp"

# own /dev (never the machine's)
mount -t tmpfs -o mode=755,nosuid,size=1m "lab-$NAME-dev" "$M/dev"
D=$M/dev
mknod -m 666 "$D/null" c 1 3; mknod -m 666 "$D/zero" c 1 5; mknod -m 666 "$D/full" c 1 7
mknod -m 666 "$D/random" c 1 8; mknod -m 666 "$D/urandom" c 1 9; mknod -m 666 "$D/tty" c 5 0
mknod -m 600 "$D/console" c 1 3
mkdir -p "$D/pts" "$D/shm" "$D/net"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620,gid=5 devpts "$D/pts"
ln -s pts/ptmx "$D/ptmx"
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$D/shm"
ln -s /proc/self/fd "$D/fd"; ln -s /proc/self/fd/0 "$D/stdin"
ln -s /proc/self/fd/1 "$D/stdout"; ln -s /proc/self/fd/2 "$D/stderr"
case "$GPUS" in
  mknod:*)
    n=${GPUS#mknod:}
    for ((i = 0; i < n; i++)); do mknod -m 666 "$D/nvidia$i" c 1 3; done
    mknod -m 666 "$D/nvidiactl" c 1 3; mknod -m 666 "$D/nvidia-uvm" c 1 3 ;;
  bind)   # passthrough: the node's own device nodes (same inodes, so fuser on the node sees CT users)
    for f in /dev/nvidia*; do [ -e "$f" ] || continue; touch "$D/${f#/dev/}"; mount --bind "$f" "$D/${f#/dev/}"; done ;;
esac

# the checkout (read-only) and the lab dir at the same paths as outside
mkdir -p "$M$CHECKOUT" "$M$LABDIR"
mount --bind "$CHECKOUT" "$M$CHECKOUT"
mount -o remount,bind,ro "$M$CHECKOUT"
mount --rbind "$LABDIR" "$M$LABDIR"
for d in ${LAB_SHARE:-}; do mkdir -p "$d" "$M$d"; mount --bind "$d" "$M$d"; done

# seed: hostname, authorized_keys, masks, fakes, configs
cp -a "$SEED/." "$M/"
echo "$NAME" > "$M/etc/hostname"
hostname "$NAME"
# a GPU server's root has none of this machine's developer tooling: its ~/.bashrc runs `pyenv rehash`, whose lock
# file is seen through the overlay's lower layer by every host and stalled SSH logins for 60 s
cat > "$M/root/.bashrc" <<'BASHRC'
# lab host: a plain root shell
[ -z "$PS1" ] && return
PS1='\u@\h:\w\$ '
BASHRC

# a non-root login with sudo, as most inventories have it (ansible_user: deploy, ansible_become: true); the user is
# made in this host's overlay, never on the machine
if ! chroot "$M" /usr/bin/id -u deploy >/dev/null 2>&1; then
  chroot "$M" /usr/sbin/useradd --create-home --shell /bin/bash deploy
fi
mkdir -p "$M/home/deploy/.ssh"
cp "$M/root/.ssh/authorized_keys" "$M/home/deploy/.ssh/authorized_keys"
chroot "$M" /bin/chown -R deploy:deploy /home/deploy/.ssh
chmod 700 "$M/home/deploy/.ssh"; chmod 600 "$M/home/deploy/.ssh/authorized_keys"
mkdir -p "$M/etc/sudoers.d"
printf 'deploy ALL=(ALL:ALL) NOPASSWD: ALL\n' > "$M/etc/sudoers.d/llmserve-lab-deploy"
chmod 0440 "$M/etc/sudoers.d/llmserve-lab-deploy"

if [ -n "${LAB_MLENV:-}" ]; then
  chroot "$M" /usr/bin/python3 -m venv --system-site-packages --without-pip /root/ml-env
fi

cd "$M"
mkdir -p .lab-oldroot
pivot_root . .lab-oldroot
umount -l /.lab-oldroot
rmdir /.lab-oldroot
cd /
exec env -i container="${LAB_CONTAINER:-llmserve-lab}" PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  /lib/systemd/systemd --system --log-target=journal-or-kmsg
