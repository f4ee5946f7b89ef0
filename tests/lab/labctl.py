#!/usr/bin/env python
"""The lab of mock hosts: real systemd + sshd in Linux namespaces, fake GPUs, a fake Proxmox node.

    python3 tests/lab/labctl.py up [--gpu-model sm90 | --gpu-model gpu01=sm90 ...] [--gpu-count N] [--config FILE]
                                  [--real-sglang | --real-sglang gpu01 ...] [--slots N]
    python3 tests/lab/labctl.py down
    python3 tests/lab/labctl.py status [--json]
    python3 tests/lab/labctl.py ssh HOST [-- CMD ...]
    python3 tests/lab/labctl.py exec HOST -- CMD ...     (nsenter, no ssh)

Run as root. State lives in /var/tmp/llmserve-lab (LLMLAB_DIR overrides). See tests/lab/README.md.
Safety: every host boots on an overlay root (tests/lab/hostboot.sh), `down` kills only the PIDs recorded
in state.json, and lab traffic stays on loopback and 10.77.0.0/24.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(os.path.dirname(HERE))
LAB = os.environ.get("LLMLAB_DIR", "/var/tmp/llmserve-lab")
STATE = os.path.join(LAB, "state.json")
KEY = os.path.join(LAB, "ssh", "id_ed25519")
CGROOT = "/sys/fs/cgroup/unified"
CGLAB = os.path.join(CGROOT, "llmlab")
# An unprivileged container's root as Proxmox maps it: uid/gid 0..65535 inside = 100000..165535 on the node.
IDMAP = (100000, 65536)
# The machine's root seen through an id-mapped mount (uid 0 -> 100000): the lower layer of unprivileged containers.
IDMAP_ROOT = os.path.join(LAB, "idmap-root")
BOOT = os.path.join(HERE, "hostboot.sh")
SUBNET_PREFIX = "10.77.0."
SSH_OPTS = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            "-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]
# Units never started in a mock host (enabled ones found on the machine are added at `up`).
MASK = [
    "postgresql.service", "postgresql@.service", "cron.service", "anacron.service", "rsyslog.service",
    "getty@.service", "serial-getty@.service", "console-getty.service", "getty-static.service", "getty.target",
    "systemd-udevd.service", "systemd-udevd-control.socket", "systemd-udevd-kernel.socket",
    "systemd-udev-trigger.service", "systemd-udev-settle.service", "systemd-hwdb-update.service",
    "systemd-modules-load.service", "kmod-static-nodes.service", "systemd-sysctl.service",
    "systemd-binfmt.service", "proc-sys-fs-binfmt_misc.automount", "proc-sys-fs-binfmt_misc.mount",
    "systemd-remount-fs.service", "systemd-fsck-root.service", "systemd-fsckd.socket", "systemd-fsckd.service",
    "systemd-firstboot.service", "systemd-pstore.service", "systemd-timesyncd.service",
    "systemd-networkd.service", "systemd-networkd.socket", "systemd-networkd-wait-online.service",
    "networking.service", "ifupdown-pre.service", "systemd-random-seed.service", "swap.target",
    "dev-hugepages.mount", "dev-mqueue.mount", "sys-kernel-debug.mount", "sys-kernel-tracing.mount",
    "sys-fs-fuse-connections.mount", "sys-kernel-config.mount", "e2scrub_reap.service", "e2scrub_all.timer",
    "apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer", "fstrim.timer", "man-db.timer",
    "systemd-tmpfiles-clean.timer", "logrotate.timer", "systemd-journald-audit.socket", "ssh.socket",
    "systemd-logind.service", "user@.service", "user-runtime-dir@.service",
]
# The real SGLang 0.5.23 (tests/lab/realsglang/install.py): its venv, the stand-in driver library, the tiny model.
REAL_ROOT = os.environ.get("LLMSERVE_LAB_REAL_ROOT", "/var/lib/llmserve-lab")
REAL_PYTHON = os.path.join(REAL_ROOT, "sglang-0.5.23", "bin", "python3")
REAL_STUB = os.path.join(REAL_ROOT, "stub", "libcuda.so.1")
REAL_MODEL = os.path.join(REAL_ROOT, "models", "tiny-qwen2-chat")
KEEP = {"ssh.service", "sshd.service", "remote-fs.target", "systemd-journald.service"}


# A lab of N slots: N copies of the configured hosts, side by side on the bridge, for test sessions that run
# independent work at once (tests/lab/labsession.py maps a host's name and address to its copy in a slot).
SLOT_STEP = 40          # slot k's copy of 10.77.0.X is 10.77.0.(X + 40k)


def slot_name(name: str, k: int) -> str:
    return name if k == 0 else f"{name}s{k}"


def slot_ip(ip: str, k: int) -> str:
    last = int(ip.rsplit(".", 1)[1]) + SLOT_STEP * k
    if not 1 < last < 255:
        raise ValueError(f"slot {k}: {ip} has no copy in {SUBNET_PREFIX}0/24 (at most {(254 - int(ip.rsplit('.', 1)[1])) // SLOT_STEP + 1} slots)")
    return SUBNET_PREFIX + str(last)


def with_slots(cfg: dict, slots: int) -> dict:
    """``cfg`` with its hosts copied into slots 1..slots-1: names suffixed ``sK``, addresses moved by SLOT_STEP * K,
    a container's node the copy in its own slot (a container keeps its vmid: it lives on another node)."""
    if slots < 1:
        raise ValueError(f"--slots {slots}: at least 1")
    hosts = dict(cfg["hosts"])
    for k in range(1, slots):
        for name, h in cfg["hosts"].items():
            copy = dict(h, ip=slot_ip(h["ip"], k))
            if "node" in h:
                copy["node"] = slot_name(h["node"], k)
            if slot_name(name, k) in hosts or len(slot_name(name, k)) > 10:
                raise ValueError(f"slot {k}: cannot copy {name} as {slot_name(name, k)} (taken, or over 10 characters)")
            hosts[slot_name(name, k)] = copy
    ips = [h["ip"] for h in hosts.values()]
    if len(set(ips)) != len(ips):
        raise ValueError(f"--slots {slots}: two hosts would share an address")
    return dict(cfg, hosts=hosts, slots=slots)


# --------------------------------------------------------------------------- helpers
def v1_lab_dirs() -> list[str]:
    """The lab's cgroups in the machine's cgroup v1 memory and devices hierarchies, below this process's own cgroup
    there (so the lab stays inside whatever limits the caller runs under); [] where there is no such hierarchy."""
    out = []
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for ln in lines:
        _hid, ctrls, path = ln.split(":", 2)
        for ctrl in ("memory", "devices"):
            if ctrl in ctrls.split(",") and os.path.isdir(f"/sys/fs/cgroup/{ctrl}"):
                base = f"/sys/fs/cgroup/{ctrl}{path.rstrip('/')}"
                if os.path.basename(base) == "llmlab" or "/llmlab/" in base:
                    base = base[:base.index("/llmlab")]
                out.append(os.path.join(base, "llmlab"))
    return out


def mounted(path: str) -> bool:
    """A mount point in this mount namespace (os.path.ismount misses a bind of a file system's root on that same
    file system, such as the id-mapped root)."""
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return any(ln.split()[4] == path for ln in f)


def log(msg: str) -> None:
    print(msg, flush=True)


def run(argv, check=True, **kw) -> subprocess.CompletedProcess:
    cp = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False, **kw)
    if check and cp.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} -> {cp.returncode}: {cp.stderr.strip()}")
    return cp


def load_config(path: str | None) -> dict:
    path = path or os.path.join(HERE, "lab.yml")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        return json.loads(text)
    except ValueError:
        import yaml  # python3-yaml (Debian) / PyYAML
        return yaml.safe_load(text)


def load_state() -> dict:
    try:
        with open(STATE, encoding="utf-8") as f:
            st = json.load(f)
    except FileNotFoundError:
        return {}
    refresh_containers(st)
    return st


def refresh_containers(st: dict) -> None:
    """A container may have been stopped/started by `pct` on its node: follow its current init."""
    for r in st.get("hosts", {}).values():
        node = st["hosts"].get(r.get("node") or "")
        if r.get("role") != "container" or not node or same_proc(r) or not same_proc(node):
            continue
        try:
            with open(f"/proc/{node['pid']}/root/run/pve-fake/lxc/{r['vmid']}.pid", encoding="utf-8") as f:
                in_node = int(f.read().split()[0])
        except (OSError, ValueError):
            continue
        pid = find_ct_init(node["pid"], in_node)
        if pid:
            r.update(pid=pid, start=proc_start(pid), pid_in_node=in_node)


def save_state(st: dict) -> None:
    os.makedirs(LAB, exist_ok=True)
    tmp = STATE + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(st, f, indent=2)
    os.replace(tmp, STATE)


def alive(pid) -> bool:
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def proc_start(pid) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def same_proc(rec: dict | None) -> bool:
    """The recorded PID is still the process we started (PID + start time)."""
    return bool(rec) and alive(rec.get("pid")) and proc_start(rec["pid"]) == rec.get("start")


def ns_of(pid) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="utf-8") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def nsenter(pid: int, argv: list[str], **kw) -> subprocess.CompletedProcess:
    return run(["nsenter", "-t", str(pid), "-m", "-u", "-i", "-n", "-p", "-C", "-r", "-w", "--", *argv], **kw)


def is_running(pid: int) -> str:
    cp = nsenter(pid, ["systemctl", "is-system-running"], check=False, timeout=10)
    return cp.stdout.strip()


def port_open(ip: str, port: int = 22, timeout: float = 0.3) -> bool:
    assert ip.startswith(SUBNET_PREFIX)
    try:
        with socket.create_connection((ip, port), timeout=timeout) as s:
            return s.recv(4).startswith(b"SSH")
    except OSError:
        return False


def rm_cgroup_tree(path: str) -> None:
    if not os.path.isdir(path):
        return
    for dirpath, dirnames, _files in sorted(os.walk(path, topdown=False), key=lambda t: -t[0].count("/")):
        for _attempt in range(50):
            try:
                os.rmdir(dirpath)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)


# --------------------------------------------------------------------------- seed trees
def write(path: str, text: str, mode: int = 0o644) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, mode)


def enabled_units() -> list[str]:
    cp = run(["systemctl", "list-unit-files", "--state=enabled", "--no-legend", "--no-pager"], check=False)
    return [ln.split()[0] for ln in cp.stdout.splitlines() if ln.strip()]


def wrapper(module: str) -> str:
    return (f"#!/usr/bin/python3\n# lab fake, see {HERE}/fakes/{module}.py\nimport sys\n"
            f"sys.path.insert(0, {os.path.join(HERE, 'fakes')!r})\n"
            f"from {module} import main\nsys.exit(main())\n")


# The inventory's model folder on the GPU hosts, for the fake SGLang (which reads no weights): what a download
# leaves, config, index, two shards, tokenizer, small, so that the collection's model check reads a whole model.
LAB_MODEL = "/models/Qwen3.5-397B-A17B-NVFP4"


def write_lab_model(path: str) -> None:
    os.makedirs(path, exist_ok=True)
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    write(os.path.join(path, "config.json"), json.dumps(
        {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
         "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"},
         # a multimodal model's vocabulary size is its language model's: the load test reads it from here
         "text_config": {"vocab_size": 248320}}, indent=2) + "\n")
    write(os.path.join(path, "model.safetensors.index.json"), json.dumps(
        {"metadata": {"total_size": 2 * 4096}, "weight_map": {"lm_head.weight": shards[0],
                                                              "model.embed_tokens.weight": shards[1]}}, indent=2) + "\n")
    for shard in shards:
        with open(os.path.join(path, shard), "wb") as f:
            f.write(b"\0" * 4200)
    write(os.path.join(path, "tokenizer.json"), '{"version": "1.0", "model": {"type": "BPE"}}\n')
    write(os.path.join(path, "tokenizer_config.json"), '{"tokenizer_class": "Qwen2Tokenizer"}\n')


def make_seed(name: str, h: dict, cfg: dict, masks: list[str]) -> str:
    sys.path.insert(0, os.path.join(HERE, "fakes"))
    import fakegpu  # noqa: E402
    seed = os.path.join(LAB, "hosts", name, "seed")
    shutil.rmtree(seed, ignore_errors=True)
    os.makedirs(os.path.join(seed, "etc/systemd/system"))
    for u in masks:
        os.symlink("/dev/null", os.path.join(seed, "etc/systemd/system", u))
    os.makedirs(os.path.join(seed, "root/.ssh"), mode=0o700)
    os.chmod(os.path.join(seed, "root/.ssh"), 0o700)
    shutil.copy(KEY + ".pub", os.path.join(seed, "root/.ssh/authorized_keys"))
    os.chmod(os.path.join(seed, "root/.ssh/authorized_keys"), 0o600)
    write(os.path.join(seed, "etc/fstab"), "# llmserve lab host: no mounts\n")
    # no logind sessions for SSH logins: pam_systemd/user@0 in a nested pid namespace can stall a login
    with open("/etc/pam.d/common-session", encoding="utf-8") as f:
        pam = "".join(ln for ln in f if "pam_systemd.so" not in ln)
    write(os.path.join(seed, "etc/pam.d/common-session"), pam)
    write(os.path.join(seed, "etc/machine-id"), os.urandom(16).hex() + "\n", 0o444)
    hosts = "127.0.0.1\tlocalhost\n" + "".join(
        f"{x['ip']}\t{n}\n" for n, x in cfg["hosts"].items())
    write(os.path.join(seed, "etc/hosts"), hosts)
    role = h["role"]
    gpu_src = h if role != "container" else cfg["hosts"][h["node"]]
    if role in ("gpu", "proxmox_node", "container"):
        gcfg = fakegpu.make_config(gpu_src.get("gpu_model", "sm120"), int(gpu_src.get("gpu_count", 8)),
                                   h["node"] if role == "container" else name,
                                   h.get("vmid") if role == "container" else None)
        write(os.path.join(seed, "etc/fakegpu/config.json"), json.dumps(gcfg, indent=2) + "\n")
        if role != "container":   # a container's is its node's (bound in at boot)
            os.makedirs(os.path.join(seed, "var/lib/fakegpu/procs"), exist_ok=True)
        write(os.path.join(seed, "usr/bin/nvidia-smi"), wrapper("nvidia_smi"), 0o755)
    if role == "proxmox_node":
        write(os.path.join(seed, "usr/sbin/pct"), wrapper("pct"), 0o755)
        os.makedirs(os.path.join(seed, f"etc/pve/nodes/{name}/lxc"), exist_ok=True)
        os.symlink(f"nodes/{name}/lxc", os.path.join(seed, "etc/pve/lxc"))
        cts = {}
        for cn, c in cfg["hosts"].items():
            if c.get("role") != "container" or c.get("node") != name:
                continue
            vmid = int(c["vmid"])
            n_gpu = int(h.get("gpu_count", 8))
            unpriv = bool(c.get("unprivileged"))
            conf = (f"arch: amd64\ncores: 32\nfeatures: nesting=1\nhostname: {cn}\nmemory: {int(c.get('memory', 262144))}\n"
                    f"net0: name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:{vmid % 256:02X},ip={c['ip']}/24,type=veth\n"
                    f"{'' if c.get('onboot', True) else 'onboot: 0' + chr(10)}"
                    f"ostype: debian\nrootfs: local-lvm:vm-{vmid}-disk-0,size=200G\nswap: 0\nunprivileged: {int(unpriv)}\n"
                    "lxc.cgroup2.devices.allow: c 195:* rwm\nlxc.cgroup2.devices.allow: c 508:* rwm\n")
            if unpriv:  # as Proxmox writes a custom id map: root = 100000 on the node
                conf += (f"lxc.idmap: u 0 {IDMAP[0]} {IDMAP[1]}\nlxc.idmap: g 0 {IDMAP[0]} {IDMAP[1]}\n")
            for i in range(n_gpu):
                conf += f"lxc.mount.entry: /dev/nvidia{i} dev/nvidia{i} none bind,optional,create=file\n"
            conf += ("lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\n"
                     "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n")
            write(os.path.join(seed, f"etc/pve/nodes/{name}/lxc/{vmid}.conf"), conf, 0o640)
            cts[str(vmid)] = {"name": cn, "hostname": cn, "netns": os.path.join(LAB, "netns", cn),
                              "mnt": os.path.join(LAB, "hosts", cn, "mnt"), "seed": os.path.join(LAB, "hosts", cn, "seed"),
                              "checkout": CHECKOUT, "labdir": LAB, "boot": BOOT, "share": "/var/lib/fakegpu",
                              "mlenv": bool(c.get("ml_env")), "lower": IDMAP_ROOT if unpriv else "/"}
        write(os.path.join(seed, "etc/pve-fake/lab.json"), json.dumps({"node": name, "containers": cts}, indent=2))
    if h.get("real_sglang"):
        # the real server as sglang_python: the venv is outside the host's root (seen through the overlay's lower
        # layer); the host gets the driver library stand-in where the NVIDIA driver puts it, and the marker that
        # makes the lab's GPU plugin in that venv play this host's GPUs (tests/lab/realsglang/plugin)
        if not os.path.exists(REAL_STUB) or not os.access(REAL_PYTHON, os.X_OK):
            raise RuntimeError(f"{name}: real_sglang needs {REAL_PYTHON} and {REAL_STUB}: "
                               "run `make setup-real-sglang` (tests/lab/realsglang/install.py)")
        os.makedirs(os.path.join(seed, "usr/lib/x86_64-linux-gnu"), exist_ok=True)
        shutil.copy(REAL_STUB, os.path.join(seed, "usr/lib/x86_64-linux-gnu/libcuda.so.1"))
        write(os.path.join(seed, "etc/llmserve-lab/real-sglang.json"), json.dumps({
            "checkout": CHECKOUT, "behaviour": "/etc/fake-sglang/behaviour.yml", "python": REAL_PYTHON,
            "model": REAL_MODEL}, indent=2) + "\n")
    if h.get("ml_env") or h.get("real_sglang"):
        write_lab_model(os.path.join(seed, LAB_MODEL.lstrip("/")))
        ver = "python" + run(["/usr/bin/python3", "-c", "import sys;print('%d.%d' % sys.version_info[:2])"]).stdout.strip()
        write(os.path.join(seed, f"root/ml-env/lib/{ver}/site-packages/llmserve-lab.pth"),
              f"{os.path.join(HERE, 'fake_sglang')}\n{os.path.join(HERE, 'fakes')}\n")
        beh = os.path.join(HERE, "behaviour", "default.yml")
        if os.path.exists(beh):
            os.makedirs(os.path.join(seed, "etc/fake-sglang"), exist_ok=True)
            shutil.copy(beh, os.path.join(seed, "etc/fake-sglang/behaviour.yml"))
    return seed


# --------------------------------------------------------------------------- network
def make_netns(name: str, ip: str, bridge: str, unprivileged: bool = False) -> str:
    assert ip.startswith(SUBNET_PREFIX), ip
    nsf = os.path.join(LAB, "netns", name)
    os.makedirs(os.path.dirname(nsf), exist_ok=True)
    if not os.path.ismount(nsf):
        open(nsf, "w").close()
        run(["unshare", f"--net={nsf}", "true"])
    outer = f"llm-{name}"[:15]
    if not os.path.exists(f"/sys/class/net/{outer}"):
        run(["nsenter", f"--net={nsf}", "ip", "link", "add", "eth0", "type", "veth", "peer", "name", outer,
             "netns", str(os.getpid())])
    run(["nsenter", f"--net={nsf}", "ip", "-batch", "-"], input=(
        "link set lo up\n" f"addr replace {ip}/24 dev eth0\n" "link set eth0 up\n"))
    run(["ip", "link", "set", outer, "master", bridge, "up"])
    if unprivileged:
        # the container's network namespace belongs to the machine's user namespace, not the container's: let its
        # root (uid 100000 here) bind sshd's port 22 there
        run(["nsenter", f"--net={nsf}", "sysctl", "-q", "-w", "net.ipv4.ip_unprivileged_port_start=0"])
    return nsf


def make_bridge(cfg: dict) -> None:
    br = cfg.get("bridge", "llmlab0")
    if not os.path.exists(f"/sys/class/net/{br}"):
        run(["ip", "link", "add", br, "type", "bridge"])
    run(["ip", "addr", "replace", cfg.get("bridge_ip", "10.77.0.1/24"), "dev", br])
    run(["ip", "link", "set", br, "up"])


# --------------------------------------------------------------------------- id-mapped root
def mount_idmapped_root(target: str, base: int, count: int) -> None:
    """Mount the machine's root file system (not its submounts) read-only at ``target`` through an id mapping
    0 -> base for count ids (open_tree + mount_setattr(MOUNT_ATTR_IDMAP) + move_mount; util-linux 2.38 has no
    X-mount.idmap). Files owned by uid 0 read as uid ``base`` there: an unprivileged container's root owns them."""
    import ctypes  # noqa: PLC0415
    if mounted(target):
        return
    os.makedirs(target, exist_ok=True)
    helper = subprocess.Popen(["unshare", "--user", "--", "sleep", "30"])
    try:
        own = os.readlink("/proc/self/ns/user")
        for _attempt in range(500):
            try:
                if os.readlink(f"/proc/{helper.pid}/ns/user") != own:
                    break
            except OSError:
                pass
            time.sleep(0.01)
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{helper.pid}/{name}", "w", encoding="ascii") as f:
                f.write(f"0 {base} {count}\n")
        nsfd = os.open(f"/proc/{helper.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        helper.kill()
        helper.wait()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    def check(rc, what):
        if rc < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")
        return rc

    # x86_64: open_tree 428, move_mount 429, mount_setattr 442
    tree = check(libc.syscall(428, -100, b"/", 1 | os.O_CLOEXEC), "open_tree /")  # OPEN_TREE_CLONE
    try:
        attr = MountAttr(0x00100000 | 0x1, 0, 1 << 18, nsfd)   # MOUNT_ATTR_IDMAP | RDONLY, MS_PRIVATE
        check(libc.syscall(442, tree, b"", 0x1000, ctypes.byref(attr), ctypes.sizeof(attr)), "mount_setattr")
        check(libc.syscall(429, tree, b"", -100, target.encode(), 0x4), "move_mount")  # MOVE_MOUNT_F_EMPTY_PATH
    finally:
        os.close(tree)
        os.close(nsfd)


# --------------------------------------------------------------------------- up / down
def boot_host(name: str, h: dict, nsf: str, seed: str) -> dict:
    """Start a top-level mock host: its own cgroup, then unshare into the overlay boot script."""
    cg = os.path.join(CGLAB, name)
    os.makedirs(cg, exist_ok=True)
    mnt = os.path.join(LAB, "hosts", name, "mnt")
    os.makedirs(mnt, exist_ok=True)
    logf = open(os.path.join(LAB, "hosts", name, "boot.log"), "ab")
    gpus = f"mknod:{int(h.get('gpu_count', 8))}" if h["role"] in ("gpu", "proxmox_node") else "none"

    v1 = [os.path.join(d, name) for d in v1_lab_dirs()]
    for d in v1:
        os.makedirs(d, exist_ok=True)

    def pre():
        os.setsid()
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write("0")
        for d in v1:    # the node's v1 memory/devices root (its containers' limits go below it)
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write("0")

    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LAB_CONTAINER": "llmserve-lab",
           "LAB_MLENV": "1" if h.get("ml_env") else ""}
    p = subprocess.Popen(["nsenter", f"--net={nsf}", "--", "unshare", "--pid", "--mount", "--uts", "--ipc",
                          "--cgroup", "--fork", "--", BOOT, name, mnt, seed, CHECKOUT, LAB, gpus],
                         stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, preexec_fn=pre, env=env)
    logf.close()
    child = None
    for _attempt in range(200):
        kids = children(p.pid)
        if kids:
            child = kids[0]
            break
        if p.poll() is not None:
            break
        time.sleep(0.01)
    if not child:
        raise RuntimeError(f"{name}: boot failed, see {LAB}/hosts/{name}/boot.log")
    return {"pid": child, "start": proc_start(child), "unshare_pid": p.pid, "unshare_start": proc_start(p.pid),
            "ip": h["ip"], "netns": nsf, "cgroup": cg, "role": h["role"]}


def find_ct_init(node_pid: int, pid_in_node: int) -> int | None:
    """Machine PID of the process whose NSpid is (x, pid_in_node, 1)."""
    for ent in os.listdir("/proc"):
        if not ent.isdigit():
            continue
        try:
            with open(f"/proc/{ent}/status", encoding="utf-8") as f:
                for line in f:
                    if line.startswith("NSpid:"):
                        ids = line.split()[1:]
                        if len(ids) == 3 and ids[1] == str(pid_in_node) and ids[2] == "1":
                            return int(ent)
                        break
        except OSError:
            continue
    return None


def wait_running(name: str, pid: int, ip: str, deadline: float) -> str:
    state = ""
    while time.monotonic() < deadline:
        if not alive(pid):
            raise RuntimeError(f"{name}: systemd (pid {pid}) died, see {LAB}/hosts/{name}/boot.log")
        state = is_running(pid)
        if state in ("running", "degraded") and port_open(ip):
            return state
        time.sleep(0.2)
    raise RuntimeError(f"{name}: not up in time (systemd state {state!r}, ssh {'open' if port_open(ip) else 'closed'})")


def forget_ssh_masters():
    """Drop Ansible's SSH ControlPersist sockets for the lab (inventories/lab sets ansible_control_path_dir there).

    A master connection to a host that was taken down hangs every session multiplexed over it until its TCP
    connection times out; a host booted again at the same address must get a fresh connection.
    """
    shutil.rmtree(os.path.join(LAB, "cp"), ignore_errors=True)


def cmd_up(a) -> int:
    if os.geteuid() != 0:
        log("labctl: run as root")
        return 2
    t0 = time.monotonic()
    cfg = load_config(a.config)
    for name in a.without or []:
        if name not in cfg["hosts"] or any(h.get("node") == name for h in cfg["hosts"].values()):
            log(f"labctl: --without {name}: not a host of the lab, or the node of a container")
            return 2
        del cfg["hosts"][name]
    try:
        cfg = with_slots(cfg, a.slots)
    except ValueError as e:
        log(f"labctl: {e}")
        return 2
    models = {}
    for spec in a.gpu_model or []:
        if "=" in spec:
            k, v = spec.split("=", 1)
            models[k] = v
        else:
            models["*"] = spec
    for n, h in cfg["hosts"].items():
        if h["role"] != "container":
            if n in models or "*" in models:
                h["gpu_model"] = models.get(n, models.get("*"))
            if a.gpu_count:
                h["gpu_count"] = a.gpu_count
    if a.real_sglang is not None:
        wanted = set(a.real_sglang) or {n for n, h in cfg["hosts"].items() if h.get("ml_env")}
        unknown = wanted - set(cfg["hosts"])
        if unknown:
            log(f"labctl: --real-sglang: no host {', '.join(sorted(unknown))} in the lab config")
            return 2
        for n in wanted:
            cfg["hosts"][n]["real_sglang"] = True
    st = load_state()
    if st.get("hosts"):
        up = [n for n, r in st["hosts"].items() if same_proc(r)]
        # a container left stopped at up (onboot 0) need not run
        wanted = [n for n in st["hosts"] if (st.get("config") or cfg)["hosts"].get(n, {}).get("onboot", True)]
        if set(wanted) <= set(up) and set(st["hosts"]) == set(cfg["hosts"]):
            log(f"lab already up ({', '.join(up)}); `labctl.py down` first to rebuild")
            return 0
        log(f"lab partly up ({up}); tearing the rest down first")
        cmd_down(a)
    os.makedirs(os.path.join(LAB, "ssh"), exist_ok=True)
    if not os.path.exists(KEY):
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "llmserve-lab", "-f", KEY])
    st = {"config": cfg, "hosts": {}, "bridge": cfg.get("bridge", "llmlab0"), "cgroup": CGLAB,
          "checkout": CHECKOUT, "started": time.time(), "v1_cgroups": v1_lab_dirs()}
    save_state(st)
    masks = sorted((set(MASK) | set(enabled_units())) - KEEP)
    make_bridge(cfg)
    os.makedirs(CGLAB, exist_ok=True)
    seeds, nsfs = {}, {}
    for n, h in cfg["hosts"].items():
        seeds[n] = make_seed(n, h, cfg, masks)
        nsfs[n] = make_netns(n, h["ip"], st["bridge"], bool(h.get("unprivileged")))
    if any(h.get("unprivileged") for h in cfg["hosts"].values()):
        mount_idmapped_root(IDMAP_ROOT, *IDMAP)   # before the nodes boot: they see it through the lab dir
    deadline = time.monotonic() + a.timeout
    tops = [n for n, h in cfg["hosts"].items() if h["role"] != "container"]
    for n in tops:
        st["hosts"][n] = boot_host(n, cfg["hosts"][n], nsfs[n], seeds[n])
        save_state(st)
    for n in tops:
        s = wait_running(n, st["hosts"][n]["pid"], cfg["hosts"][n]["ip"], deadline)
        log(f"{n}: {s} (pid {st['hosts'][n]['pid']}, {cfg['hosts'][n]['ip']}) {time.monotonic() - t0:.1f}s")
    for n, h in cfg["hosts"].items():
        if h["role"] != "container":
            continue
        node = st["hosts"][h["node"]]
        if not h.get("onboot", True):   # a stopped container (`onboot: 0`): `pct start VMID` on its node boots it
            st["hosts"][n] = {"pid": None, "start": None, "node": h["node"], "vmid": h["vmid"], "ip": h["ip"],
                              "netns": nsfs[n], "role": "container",
                              "cgroup": os.path.join(CGLAB, h["node"], "lxc", str(h["vmid"]))}
            save_state(st)
            log(f"{n}: stopped (onboot 0; `pct start {h['vmid']}` on {h['node']})")
            continue
        cp = nsenter(node["pid"], ["/usr/sbin/pct", "start", str(h["vmid"])], check=False, timeout=60)
        if cp.returncode != 0:
            raise RuntimeError(f"{n}: pct start {h['vmid']} on {h['node']} failed: {cp.stderr.strip()}")
        in_node = int(nsenter(node["pid"], ["cat", f"/run/pve-fake/lxc/{h['vmid']}.pid"]).stdout.split()[0])
        pid = find_ct_init(node["pid"], in_node)
        st["hosts"][n] = {"pid": pid, "start": proc_start(pid), "pid_in_node": in_node, "node": h["node"],
                          "vmid": h["vmid"], "ip": h["ip"], "netns": nsfs[n], "role": "container",
                          "cgroup": os.path.join(CGLAB, h["node"], "lxc", str(h["vmid"]))}
        save_state(st)
        s = wait_running(n, pid, h["ip"], deadline)
        log(f"{n}: {s} (pid {pid}, pid {in_node} on {h['node']}, {h['ip']}) {time.monotonic() - t0:.1f}s")
    log(f"lab up in {time.monotonic() - t0:.1f}s; key {KEY}; `labctl.py ssh gpu01`")
    return 0


def cmd_down(a) -> int:
    t0 = time.monotonic()
    st = load_state()
    hosts = st.get("hosts", {})
    ctr = [n for n, r in hosts.items() if r.get("role") == "container"]
    for n in ctr:      # a stopped container (pct stop) counts as down
        if not same_proc(hosts[n]):
            hosts[n]["pid"] = None
    # containers first, then their nodes; only the PIDs this lab recorded (checked by start time)
    order = sorted(hosts, key=lambda n: hosts[n].get("role") != "container")
    nss = set()
    for n in order:
        try:
            if same_proc(hosts[n]):
                nss.add(os.readlink(f"/proc/{hosts[n]['pid']}/ns/pid"))
        except OSError:
            pass
    for n in order:
        r = hosts[n]
        for key, skey in (("pid", "start"), ("unshare_pid", "unshare_start")):
            pid = r.get(key)
            if pid and alive(pid) and proc_start(pid) == r.get(skey):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    for n in order:
        pid = hosts[n].get("pid")
        for _attempt in range(200):
            if not (pid and alive(pid) and proc_start(pid) == hosts[n].get("start")):
                break
            time.sleep(0.02)
    end = time.monotonic() + 20
    while nss and time.monotonic() < end:
        members = [e for e in os.listdir("/proc") if e.isdigit() and ns_of(e) in nss]
        if not members:
            break
        time.sleep(0.05)
    cfg = st.get("config") or load_config(getattr(a, "config", None))
    netns_dir = os.path.join(LAB, "netns")
    if os.path.isdir(netns_dir):
        for f in os.listdir(netns_dir):
            p = os.path.join(netns_dir, f)
            if os.path.ismount(p):
                run(["umount", p], check=False)
            try:
                os.unlink(p)
            except OSError:
                pass
    for n in cfg.get("hosts", {}):
        outer = f"llm-{n}"[:15]
        if os.path.exists(f"/sys/class/net/{outer}"):
            run(["ip", "link", "del", outer], check=False)
    br = st.get("bridge") or cfg.get("bridge", "llmlab0")
    if os.path.exists(f"/sys/class/net/{br}"):
        run(["ip", "link", "del", br], check=False)
    rm_cgroup_tree(CGLAB)
    v1 = sorted(set(st.get("v1_cgroups") or []) | set(v1_lab_dirs()))
    for d in v1:
        rm_cgroup_tree(d)
    if mounted(IDMAP_ROOT):
        run(["umount", IDMAP_ROOT], check=False)
    if os.path.isdir(IDMAP_ROOT) and not mounted(IDMAP_ROOT):
        try:
            os.rmdir(IDMAP_ROOT)
        except OSError:
            pass           # named by leftovers() below when still mounted
    # the per-host dirs (mount points, seeds, logs); keep the ssh key
    shutil.rmtree(os.path.join(LAB, "hosts"), ignore_errors=True)
    forget_ssh_masters()
    try:
        os.unlink(STATE)
    except FileNotFoundError:
        pass
    left = leftovers(v1)
    if left:
        log("lab down, but left behind: " + "; ".join(left))
        return 1
    log(f"lab down in {time.monotonic() - t0:.1f}s")
    return 0


def leftovers(v1: list[str] | None = None) -> list[str]:
    out = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        m = [ln.split()[4] for ln in f if LAB in ln.split()[4] or "lab-" in ln]
    if m:
        out.append(f"mounts {m}")
    links = [d for d in os.listdir("/sys/class/net") if d.startswith("llm")]
    if links:
        out.append(f"links {links}")
    for d in [CGLAB, *sorted(set(v1 or []) | set(v1_lab_dirs()))]:
        if os.path.isdir(d):
            out.append(f"cgroup {d}")
    return out


def cmd_status(a) -> int:
    st = load_state()
    rows = {}
    for n, r in st.get("hosts", {}).items():
        up = same_proc(r)
        rows[n] = {"up": up, "pid": r.get("pid"), "ip": r.get("ip"), "role": r.get("role"),
                   "systemd": is_running(r["pid"]) if up else "down", "ssh": port_open(r["ip"]) if up else False}
    if a.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        log("lab is down")
    else:
        for n, r in rows.items():
            log(f"{n:8} {r['role']:13} {r['ip']:12} pid {r['pid']!s:8} systemd={r['systemd']} ssh={'up' if r['ssh'] else 'down'}")
    return 0 if rows and all(r["up"] or r["role"] == "container" for r in rows.values()) else 3


def host_rec(name: str) -> dict:
    st = load_state()
    if name not in st.get("hosts", {}):
        sys.exit(f"labctl: no host {name!r} in the running lab ({', '.join(st.get('hosts', {})) or 'lab is down'})")
    return st["hosts"][name]


def cmd_ssh(a) -> int:
    r = host_rec(a.host)
    cmd = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    argv = ["ssh", "-i", KEY, *SSH_OPTS, *(["-t"] if not cmd and sys.stdin.isatty() else []), f"root@{r['ip']}", *cmd]
    os.execvp("ssh", argv)
    return 0


def cmd_exec(a) -> int:
    r = host_rec(a.host)
    cmd = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    os.execvp("nsenter", ["nsenter", "-t", str(r["pid"]), "-a", "--", *(cmd or ["/bin/bash", "-l"])])
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="labctl.py", description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--config", default=None, help="lab config (YAML or JSON; default tests/lab/lab.yml)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up")
    u.add_argument("--gpu-model", action="append", help="sm120|sm100|sm90, or HOST=MODEL (repeatable)")
    u.add_argument("--gpu-count", type=int, default=None)
    u.add_argument("--timeout", type=float, default=90)
    u.add_argument("--real-sglang", nargs="*", metavar="HOST", default=None,
                   help="give these GPU hosts (default: every host with ml_env) the real SGLang 0.5.23 "
                        f"({REAL_PYTHON}) besides the fake one")
    u.add_argument("--slots", type=int, default=1,
                   help="N copies of the configured hosts (slot K: names suffixed sK, addresses + 40K), for work "
                        "run side by side; default 1")
    u.add_argument("--without", action="append", metavar="HOST",
                   help="leave this host of the config out (repeatable), e.g. the router for work that needs none")
    sub.add_parser("down")
    s = sub.add_parser("status")
    s.add_argument("--json", action="store_true")
    for name in ("ssh", "exec"):
        x = sub.add_parser(name)
        x.add_argument("host")
        x.add_argument("argv", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    return {"up": cmd_up, "down": cmd_down, "status": cmd_status, "ssh": cmd_ssh, "exec": cmd_exec}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
