"""ct130, the lab's unprivileged container (root): booted with `pct start 130` on pve01 (it is `onboot: 0`, so no
other test pays for it), its uid map, its devices allow list and memory limit enforced by the kernel, and the
collection's clean-up (playbooks/cleanup.yml, from the node) ending a GPU holder that runs in it as uid 100000+.
The file sorts before test_lab.py, whose last test takes the lab down."""
import json
import os
import re
import subprocess
import tempfile
import time

import pytest

from conftest import CHECKOUT, IPS, KEY, SSH_OPTS, ssh

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root")

VMID = "130"
BASE = 100000
MEM_MIB = 192          # tests/lab/lab.yml: ct130 memory
V1 = "/run/pve-fake/cgroup"


def in_ct(cmd, check=True, timeout=60):
    """A shell command in ct130 through its node (pct exec)."""
    return ssh("pve01", "pct exec %s -- /bin/sh -c '%s'" % (VMID, cmd.replace("'", "'\\''")), check=check,
               timeout=timeout)


@pytest.fixture(scope="module")
def ct130(lab):  # pylint: disable=unused-argument,redefined-outer-name
    t0 = time.monotonic()
    ssh("pve01", "pct start %s" % VMID)
    state = ""
    for _attempt in range(150):
        state = in_ct("systemctl is-system-running", check=False).stdout.strip()
        if state in ("running", "degraded"):
            break
        time.sleep(0.2)
    init = int(re.search(r"^pid: (\d+)$", ssh("pve01", "pct status %s --verbose" % VMID).stdout, re.M).group(1))
    try:
        yield {"state": state, "boot_s": round(time.monotonic() - t0, 1), "init": init}
    finally:
        ssh("pve01", "pct stop %s" % VMID, check=False)


def test_boots_unprivileged(ct130):  # pylint: disable=redefined-outer-name
    assert ct130["state"] in ("running", "degraded"), (ct130, in_ct("systemctl --failed --no-legend", check=False).stdout)
    conf = ssh("pve01", "pct config %s" % VMID).stdout.splitlines()
    assert "unprivileged: 1" in conf
    assert "lxc.idmap: u 0 100000 65536" in conf and "lxc.idmap: g 0 100000 65536" in conf
    assert "lxc.cgroup2.devices.allow: c 195:* rwm" in conf and "memory: %d" % MEM_MIB in conf
    # inside: root with the map Proxmox writes; from the node: the container's root is uid 100000
    maps = in_ct("id -u; cat /proc/self/uid_map /proc/self/gid_map").stdout.split()
    assert maps == ["0", "0", str(BASE), "65536", "0", str(BASE), "65536"], maps
    node_uid = ssh("pve01", "awk '/^Uid:/ {print $2}' /proc/%d/status" % ct130["init"]).stdout.strip()
    assert node_uid == str(BASE), node_uid
    # the container's files: its root's own, read through the id-mapped root (no "nobody")
    owners = in_ct("stat -c %U /etc/passwd /root/.ssh/authorized_keys /usr/bin/python3").stdout.split()
    assert owners == ["root", "root", "root"], owners
    # SSH as root, as to ct129 (its sshd binds port 22 as uid 100000)
    assert ssh("ct130", "hostname; id -u").stdout.split() == ["ct130", "0"]
    # and as the sudo user (sudo is set-uid to the container's root, uid 100000 on the node)
    cp = subprocess.run(["ssh", "-i", KEY, *SSH_OPTS, "deploy@%s" % IPS["ct130"], "id -u; sudo -n id -u"],
                        capture_output=True, text=True, timeout=30, check=False)
    ids = cp.stdout.split()
    assert len(ids) == 2 and ids[0] != "0" and ids[1] == "0", (cp.returncode, cp.stdout, cp.stderr)
    # the node's own files stay the node's: the container's root cannot write them (its ids stop at 165535)
    assert ssh("pve01", "stat -c %%u /proc/%d/root/etc/passwd" % ct130["init"]).stdout.strip() == str(BASE)


def test_device_not_on_the_allow_list_is_refused(ct130):  # pylint: disable=redefined-outer-name
    probe = ("python3 - %s <<'EOF'\nimport os, sys\nfor p in sys.argv[1:]:\n    try:\n"
             "        os.close(os.open(p, os.O_RDONLY | os.O_NONBLOCK))\n        print(p, 'ok')\n"
             "    except OSError as e:\n        print(p, e.errno)\nEOF")
    inside = in_ct(probe % "/dev/hwrng /dev/nvidia0 /dev/nvidiactl /dev/null").stdout.split("\n")
    # c 10:183 is not on the list: EPERM (1) from the devices cgroup; the passed-through GPU nodes open
    assert inside[:4] == ["/dev/hwrng 1", "/dev/nvidia0 ok", "/dev/nvidiactl ok", "/dev/null ok"], inside
    # the same node opens from the node (outside the container's cgroup): the refusal is the list's, not the mode's
    outside = ssh("pve01", probe % ("/proc/%d/root/dev/hwrng" % ct130["init"])).stdout.split()
    assert outside[1:] == ["ok"], outside
    listed = ssh("pve01", "cat %s/devices/lxc/%s/devices.list" % (V1, VMID)).stdout.splitlines()
    assert "c 195:* rwm" in listed and "a *:* rwm" not in listed and "c 10:183 rwm" not in listed, listed


def test_memory_limit_is_enforced(ct130):  # pylint: disable=redefined-outer-name
    cg = "%s/memory/lxc/%s" % (V1, VMID)
    limit = int(ssh("pve01", "cat %s/memory.limit_in_bytes" % cg).stdout)
    assert limit == MEM_MIB * 1048576, limit
    # the container's init is in that cgroup
    assert str(ct130["init"]) in ssh("pve01", "cat %s/cgroup.procs" % cg).stdout.split()

    def oom_kills():
        out = ssh("pve01", "cat %s/memory.oom_control" % cg).stdout
        return int(re.search(r"^oom_kill (\d+)$", out, re.M).group(1))

    before = oom_kills()
    alloc = "python3 -c \"b = b'\\\\1' * (%d << 20); print(len(b) >> 20)\""
    small = in_ct(alloc % 48, check=False)
    assert small.returncode == 0 and small.stdout.strip() == "48", (small.returncode, small.stdout, small.stderr)
    big = in_ct(alloc % (MEM_MIB * 2), check=False)
    # SIGKILLed by the cgroup's OOM killer: pct exec passes 128+9
    assert big.returncode == 137, (big.returncode, big.stdout, big.stderr)
    assert oom_kills() > before
    # the container lives on
    assert in_ct("systemctl is-system-running", check=False).stdout.strip() in ("running", "degraded")


def test_cleanup_from_node_ends_holder(ct130, tmp_path):  # pylint: disable=redefined-outer-name
    f = "/run/holder-%d" % time.monotonic_ns()
    in_ct("setsid -f python3 %s/tests/lab/fakes/fakegpu.py hold --gpus 3 --mib 11111 --name python3 "
          "--ignore-sigterm --ready-file %s >/dev/null 2>&1 </dev/null; "
          "for i in $(seq 100); do [ -s %s ] && break; sleep 0.05; done" % (CHECKOUT, f, f))
    ct_pid = int(in_ct("cat %s" % f).stdout)
    apps = ssh("pve01", "nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits").stdout
    node_pid = int(apps.split(",")[0])
    status = ssh("pve01", "cat /proc/%d/status /proc/%d/cgroup" % (node_pid, node_pid)).stdout
    # the node sees it with its node PID, as uid 100000 (the container's root), in lxc/130
    assert re.search(r"^NSpid:\s+%d\s+%d$" % (node_pid, ct_pid), status, re.M), status
    assert re.search(r"^Uid:\s+%d\s" % BASE, status, re.M), status
    assert "0::/lxc/%s/ns" % VMID in status, status

    inv = tmp_path / "inv.yml"
    inv.write_text(json.dumps({"all": {"children": {
        "sglang_servers": {"hosts": {"ct130": {
            "ansible_connection": "community.proxmox.proxmox_pct_remote", "ansible_host": "10.77.0.12",
            "proxmox_vmid": int(VMID), "sglang_proxmox_node": "pve01", "sglang_proxmox_vmid": int(VMID)}}},
        "proxmox_nodes": {"hosts": {"pve01": {"ansible_host": "10.77.0.12"}}}},
        "vars": {"ansible_user": "root", "ansible_private_key_file": KEY, "ansible_host_key_checking": False,
                 "ansible_python_interpreter": "/usr/bin/python3", "gpu_cleanup_term_grace": 2}}}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(CHECKOUT, ".tmp", "collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_CONTROL_PATH_DIR=tempfile.mkdtemp(prefix="llmlab-cp-"))
    t0 = time.monotonic()
    cp = subprocess.run([os.path.join(CHECKOUT, ".venv", "bin", "ansible-playbook"), "playbooks/cleanup.yml",
                         "-i", str(inv), "--limit", "ct130"], cwd=CHECKOUT, capture_output=True, text=True,
                        timeout=300, env=env, check=False)
    seconds = time.monotonic() - t0
    out = cp.stdout + cp.stderr
    assert cp.returncode == 0, out[-4000:]
    # the role's summary names the holder by its node PID
    assert re.search(r"1 GPU holder\(s\) ended\s+\(%d\)" % node_pid, out), out[-3000:]
    assert ssh("pve01", "test -e /proc/%d" % node_pid, check=False).returncode != 0
    assert in_ct("test -e /proc/%d" % ct_pid, check=False).returncode != 0
    used = ssh("pve01", "nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 3").stdout.strip()
    assert used == "0", used
    print("cleanup.yml from pve01 for ct130: %.1f s; ct130 boot %.1f s" % (seconds, ct130["boot_s"]))
