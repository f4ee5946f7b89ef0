"""The lab itself (root): hosts, SSH, Ansible, fake nvidia-smi in hosts, the node<->container view, pct, down.
Runs the lab up once (session fixture); the last test tears it down and checks nothing is left."""
import os
import re
import subprocess
import time

import pytest

from conftest import CHECKOUT, LABCTL, ssh

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root")


def start_holder(host, gpus, mib, name="python3", extra=""):
    """Start a detached holder; return its pid as seen in that host."""
    f = f"/run/holder-{time.monotonic_ns()}"
    ssh(host, f"setsid -f python3 {CHECKOUT}/tests/lab/fakes/fakegpu.py hold --gpus {gpus} --mib {mib} "
              f"--name {name} --ready-file {f} {extra} >/dev/null 2>&1 </dev/null; "
              f"for i in $(seq 100); do [ -s {f} ] && break; sleep 0.05; done; cat {f}")
    return int(ssh(host, f"cat {f}").stdout)


def test_up_reports_each_host(lab):
    for h in ("gpu01", "pve01", "ct129", "gpu02", "rt01"):
        assert re.search(rf"^{h}: (running|degraded)", lab["up_output"], re.M), lab["up_output"]
    again = subprocess.run([*LABCTL, "up"], capture_output=True, text=True, check=False)
    assert again.returncode == 0 and "already up" in again.stdout


@pytest.mark.parametrize("host", ["gpu01", "pve01", "ct129", "gpu02"])
def test_ssh_and_systemd(lab, host):
    out = ssh(host, "hostname; systemctl is-system-running; test -c /dev/nvidia0 && echo gpu").stdout.split()
    assert out[0] == host and out[1] in ("running", "degraded") and out[2] == "gpu"


def test_ansible_ping(lab):
    cp = subprocess.run([os.path.join(CHECKOUT, ".venv/bin/ansible"), "-i", os.path.join(CHECKOUT, "inventories/lab"),
                         "all", "-m", "ansible.builtin.ping"], capture_output=True, text=True, cwd=CHECKOUT, timeout=120, check=False)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    # inventories/lab: the GPU host, the node, the container, the router's host (ct130 and gpu02, a spare GPU
    # host the fleet's tests add with an inventory of their own, are not in it)
    assert sorted(re.findall(r"^(\S+) \| SUCCESS", cp.stdout, re.M)) == ["ct129", "gpu01", "pve01", "rt01"], cp.stdout


def test_ml_env_sees_fakes(lab):
    for h in ("gpu01", "ct129"):
        out = ssh(h, "/root/ml-env/bin/python3 -c 'import sys, fakegpu; print(sys.prefix, fakegpu.__file__)'").stdout
        assert out.split() == ["/root/ml-env", f"{CHECKOUT}/tests/lab/fakes/fakegpu.py"]


def test_gpu01_8_gpus_default_model(lab):
    out = ssh("gpu01", "nvidia-smi --query-gpu=index,name,compute_cap,memory.total --format=csv,noheader").stdout
    rows = out.splitlines()
    assert len(rows) == 8
    assert rows[0] == "0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 12.0, 97887 MiB"


def test_holder_in_nvidia_smi_and_fuser_then_freed(lab):
    pid = start_holder("gpu01", "0-1", 20000)
    apps = ssh("gpu01", "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader").stdout
    assert apps.splitlines() == [f"{pid}, python3, 20000 MiB"] * 2
    fu = ssh("gpu01", "fuser -v /dev/nvidia0 /dev/nvidiactl /dev/nvidia-uvm 2>&1", check=False).stdout
    assert re.search(rf"/dev/nvidia0:\s+root\s+{pid} F\S* python3", fu), fu
    ssh("gpu01", f"kill -9 {pid}")
    time.sleep(0.2)
    used = ssh("gpu01", "nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0,1").stdout
    assert used.split() == ["0", "0"]
    assert ssh("gpu01", "nvidia-smi --query-compute-apps=pid --format=csv,noheader").stdout == ""


def test_container_holder_seen_from_node_with_node_pid(lab):
    ct_pid = start_holder("ct129", "2", 12345)
    try:
        # inside the container: memory shows, no process is listed
        assert ssh("ct129", "nvidia-smi --query-gpu=memory.used --format=csv,noheader -i 2").stdout == "12354 MiB\n"
        assert ssh("ct129", "nvidia-smi --query-compute-apps=pid,used_memory --format=csv").stdout == \
            "pid, used_gpu_memory [MiB]\n"
        assert "No running processes found" in ssh("ct129", "nvidia-smi").stdout
        fu = ssh("ct129", "fuser -v /dev/nvidia2 2>&1", check=False).stdout
        assert re.search(rf"\s{ct_pid} F\S* python3", fu), fu
        # on the node: listed with the node's pid, cgroup 0::/lxc/129/..., NSpid ends in the CT pid
        apps = ssh("pve01", "nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits").stdout
        node_pid, mib = apps.strip().split(", ")
        assert mib == "12345" and int(node_pid) != ct_pid
        cg = ssh("pve01", f"cat /proc/{node_pid}/cgroup").stdout
        assert re.search(r"^0::/lxc/129/ns/", cg, re.M), cg
        nspid = ssh("pve01", f"grep NSpid /proc/{node_pid}/status").stdout.split()[1:]
        assert nspid == [node_pid, str(ct_pid)]
        fu = ssh("pve01", "fuser -v /dev/nvidia2 2>&1", check=False).stdout
        assert re.search(rf"\s{node_pid} F\S* python3", fu), fu
    finally:
        ssh("ct129", f"kill -9 {ct_pid}", check=False)
    time.sleep(0.2)
    assert ssh("pve01", "nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 2").stdout == "0\n"


def test_pct_list_status_exec(lab):
    out = ssh("pve01", "pct list").stdout
    assert out == "%-10s %-10s %-12s %-20s\n" * 3 % (
        "VMID", "Status", "Lock", "Name", "129", "running", "", "ct129", "130", "stopped", "", "ct130")
    assert ssh("pve01", "pct status 129").stdout == "status: running\n"
    verbose = ssh("pve01", "pct status 129 --verbose").stdout.splitlines()
    assert verbose == sorted(verbose) and "type: lxc" in verbose and any(v.startswith("pid: ") for v in verbose)
    cp = ssh("pve01", "pct exec 129 -- sh -c 'hostname; echo err >&2; cat /proc/self/cgroup; exit 7'", check=False)
    assert cp.returncode == 7 and cp.stdout.splitlines()[0] == "ct129" and cp.stderr == "err\n"
    assert "0::/.lxc" in cp.stdout
    node_view = ssh("pve01", "pct exec 129 -- sleep 2 & sleep 0.5; "
                             "for p in $(cat /sys/fs/cgroup/lxc/129/ns/.lxc/cgroup.procs); do cat /proc/$p/cgroup; done; wait",
                    check=False).stdout
    assert "0::/lxc/129/ns/.lxc" in node_view
    assert ssh("pve01", "pct exec 129 -- no-such-command", check=False).returncode == 127
    assert ssh("pve01", "pct exec 129 -- sh -c 'kill -9 $$'", check=False).returncode == 137


def test_pct_errors(lab):
    cp = ssh("pve01", "pct status 999", check=False)
    assert cp.returncode == 255 and cp.stderr == "Configuration file 'nodes/pve01/lxc/999.conf' does not exist\n"
    cp = ssh("pve01", "pct exec 999 -- true", check=False)
    assert cp.returncode == 255 and "999.conf' does not exist" in cp.stderr
    cp = ssh("pve01", "pct start 129", check=False)
    assert cp.returncode == 255 and cp.stderr == "CT 129 already running\n"


def test_pct_stop_start_container(lab):
    assert ssh("pve01", "pct stop 129").returncode == 0
    assert ssh("pve01", "pct status 129").stdout == "status: stopped\n"
    cp = ssh("pve01", "pct exec 129 -- true", check=False)
    assert cp.returncode == 255 and cp.stderr == "container '129' not running!\n"
    cp = ssh("pve01", "pct stop 129", check=False)
    assert cp.returncode == 255 and cp.stderr == "CT 129 not running\n"
    assert "129        stopped" in ssh("pve01", "pct list").stdout
    ssh("pve01", "pct start 129")
    for _attempt in range(100):
        if ssh("pve01", "pct exec 129 -- systemctl is-system-running", check=False).stdout.strip() in (
                "running", "degraded"):
            break
        time.sleep(0.2)
    for _attempt in range(50):
        if ssh("ct129", "true", check=False, timeout=10).returncode == 0:
            break
        time.sleep(0.2)
    assert ssh("ct129", "hostname").stdout == "ct129\n"


def test_zz_down_leaves_nothing(lab):
    st = subprocess.run([*LABCTL, "status", "--json"], capture_output=True, text=True, check=False)
    import json
    pids = [r["pid"] for r in json.loads(st.stdout).values() if r["up"]]
    assert len(pids) == 5, st.stdout    # gpu01, pve01, ct129, gpu02, rt01 (ct130 stays stopped)
    nss = {os.readlink(f"/proc/{p}/ns/pid") for p in pids}
    t0 = time.monotonic()
    cp = subprocess.run([*LABCTL, "down"], capture_output=True, text=True, timeout=120, check=False)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert time.monotonic() - t0 < 30
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split(")")[1][:3]
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        mounts = f.read()
    assert "llmserve-lab" not in mounts and "lab-" not in mounts
    assert not [d for d in os.listdir("/sys/class/net") if d.startswith("llm")]
    assert not os.path.exists("/sys/fs/cgroup/unified/llmlab")
    # no process left in the hosts' pid namespaces (nested ones are members of these too)
    left = []
    for ent in os.listdir("/proc"):
        if ent.isdigit():
            try:
                if os.readlink(f"/proc/{ent}/ns/pid") in nss:
                    left.append(ent)
            except OSError:
                continue
    assert left == [], left
