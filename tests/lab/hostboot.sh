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
# Env: LAB_CONTAINER (systemd's container= value), LAB_SHARE (space separated dirs bound from the caller),
#      LAB_LOWER (the overlay's lower layer, default /), LAB_IDMAP ("BASE COUNT": an unprivileged container: the
#      writable mounts and the new root's own files belong to uid/gid BASE.., and systemd runs as root of a user
#      namespace mapping 0 -> BASE for COUNT ids; LAB_LOWER is then an id-mapped view of the machine's root).
#
# NEVER boot systemd without the overlay root: this script aborts (set -e) before exec if any step fails.
set -euo pipefail
NAME=$1; MNT=$2; SEED=$3; CHECKOUT=$4; LABDIR=$5; GPUS=${6:-none}
LOWER=${LAB_LOWER:-/}
IDBASE=0; IDCOUNT=0
if [ -n "${LAB_IDMAP:-}" ]; then read -r IDBASE IDCOUNT <<<"$LAB_IDMAP"; fi
OWN=""   # tmpfs owner options for an unprivileged container
[ "$IDBASE" = 0 ] || OWN=",uid=$IDBASE,gid=$IDBASE"
[ "$$" = 1 ] || { echo "hostboot: must run as PID 1 of a new pid namespace" >&2; exit 1; }

mount --make-rprivate /
mkdir -p "$MNT/rw" "$MNT/merged"
mount -t tmpfs -o mode=755 "lab-$NAME-rw" "$MNT/rw"
mkdir -p "$MNT/rw/upper" "$MNT/rw/work"
[ "$IDBASE" = 0 ] || chown "$IDBASE:$IDBASE" "$MNT/rw/upper"
mount -t overlay "lab-$NAME-root" -o "lowerdir=$LOWER,upperdir=$MNT/rw/upper,workdir=$MNT/rw/work" "$MNT/merged"
M=$MNT/merged
# the overlay must be in place before anything else is mounted or written
findmnt -n -o FSTYPE "$M" | grep -qx overlay

mount -t proc proc "$M/proc"
mount --bind "$M/proc/sys" "$M/proc/sys"; mount -o remount,bind,ro "$M/proc/sys"
mount --bind /dev/null "$M/proc/sysrq-trigger" 2>/dev/null || true
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$M/sys"
mount -t cgroup2 cgroup2 "$M/sys/fs/cgroup"
mount -t tmpfs -o "mode=755,nosuid$OWN" tmpfs "$M/run"
mount -t tmpfs -o "mode=1777,nosuid,nodev$OWN" tmpfs "$M/tmp"
# the overlay's upper layer, read-only: exactly the files of the root written since the host booted (a test that
# looks for every file a run wrote reads this instead of walking the whole machine's root through the overlay)
mkdir -p "$M/run/lab-upper"
mount --bind "$MNT/rw/upper" "$M/run/lab-upper"
mount -o remount,bind,ro "$M/run/lab-upper"

# own /dev (never the machine's)
mount -t tmpfs -o "mode=755,nosuid,size=1m$OWN" "lab-$NAME-dev" "$M/dev"
D=$M/dev
mknod -m 666 "$D/null" c 1 3; mknod -m 666 "$D/zero" c 1 5; mknod -m 666 "$D/full" c 1 7
mknod -m 666 "$D/random" c 1 8; mknod -m 666 "$D/urandom" c 1 9; mknod -m 666 "$D/tty" c 5 0
mknod -m 600 "$D/console" c 1 3
mkdir -p "$D/pts" "$D/shm" "$D/net"
mount -t devpts -o "newinstance,ptmxmode=0666,mode=620,gid=$((IDBASE + 5))" devpts "$D/pts"
ln -s pts/ptmx "$D/ptmx"
mount -t tmpfs -o "mode=1777,nosuid,nodev$OWN" shm "$D/shm"
# an unprivileged container: a node that its devices allow list leaves out (the hardware random number generator,
# c 10:183: its open() checks no capability and the mode lets anyone read, so only the cgroup's list refuses it)
if [ "$IDBASE" != 0 ]; then
  mknod -m 444 "$D/hwrng" c 10 183
  chown "$IDBASE:$IDBASE" "$D/console"   # the container's own console (LXC gives it a pty of its own)
fi
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

if [ "$IDBASE" != 0 ]; then
  # what this boot wrote into the new root (seed, user, venv) belongs to the container's root, not the node's:
  # shift every id below COUNT by BASE (the lower layer's files are shifted already by their id-mapped mount)
  # (chown through the overlay, not in the upper layer underneath it: the overlay keeps its own copy of an inode's
  # owner, which a change made underneath it would leave stale)
  /usr/bin/python3 - "$MNT/rw/upper" "$M" "$IDBASE" "$IDCOUNT" <<'PY'
import os, sys
upper, merged, base, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
# never what is mounted on the new root (the checkout, the lab dir, /proc, /dev, ...): only the overlay's own files
with open("/proc/self/mountinfo", encoding="utf-8") as f:
    mounts = {ln.split()[4] for ln in f} - {merged}
for d, dirs, files in os.walk(upper):
    dirs[:] = [n for n in dirs
               if os.path.normpath(os.path.join(merged, os.path.relpath(os.path.join(d, n), upper))) not in mounts]
    for n in [None] + dirs + files:
        rel = os.path.relpath(d if n is None else os.path.join(d, n), upper)
        p = os.path.normpath(os.path.join(merged, rel))
        if p in mounts:
            continue
        try:
            st = os.lstat(p)
        except FileNotFoundError:   # a whiteout
            continue
        if st.st_uid < count or st.st_gid < count:
            os.lchown(p, st.st_uid + base if st.st_uid < count else st.st_uid,
                      st.st_gid + base if st.st_gid < count else st.st_gid)
            if not os.path.islink(p) and st.st_mode & 0o6000:
                os.chmod(p, st.st_mode & 0o7777)   # chown drops set-id bits
PY
fi

cd "$M"
mkdir -p .lab-oldroot
pivot_root . .lab-oldroot
# the old root's umount: in an unprivileged container's new root every set-uid binary belongs to uid 100000
/.lab-oldroot/usr/bin/umount -l /.lab-oldroot
rmdir /.lab-oldroot
cd /
USERNS=()
[ "$IDBASE" = 0 ] || USERNS=(/usr/bin/python3 "$CHECKOUT/tests/lab/usernsexec.py" "$IDBASE" "$IDCOUNT" --)
exec env -i container="${LAB_CONTAINER:-llmserve-lab}" PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  "${USERNS[@]}" /lib/systemd/systemd --system --log-target=journal-or-kmsg
