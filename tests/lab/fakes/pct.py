#!/usr/bin/env python
"""Fake Proxmox `pct` for the lab's node (installed as /usr/sbin/pct on pve01).

Formats, errors and exit codes follow Proxmox's pct (see tests/lab/README.md, "pct"):
  pct list | pct status VMID [--verbose] | pct config VMID | pct exec VMID -- CMD [ARGS...]
  pct start VMID | pct stop VMID | pct shutdown VMID [--timeout N] [--forceStop 0|1]
Containers are the ones in /etc/pve/lxc/*.conf; how to boot one is in /etc/pve-fake/lab.json
(written by labctl). A running container's init PID (this node's PID) is in /run/pve-fake/lxc/VMID.pid.
The container's processes live in cgroup /lxc/VMID/ns/... (pct exec children in /lxc/VMID/ns/.lxc),
the start helper in /lxc.monitor/VMID, as on a real node.
An unprivileged container (`unprivileged: 1`) runs in a user namespace (root = uid 100000 on the node, the
config's lxc.idmap), its cgroup is delegated to that uid, and its devices allow list (LXC's defaults plus the
config's lxc.cgroup2.devices.allow lines) and memory limit (`memory:` MiB, `swap: 0`) are enforced by the kernel.
The lab machine keeps the memory and devices controllers on cgroup v1, so the limits are written to the v1
hierarchies (memory.limit_in_bytes, devices.deny/allow), mounted on the node at /run/pve-fake/cgroup/.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

LAB_JSON = "/etc/pve-fake/lab.json"
RUN = "/run/pve-fake/lxc"
CG = "/sys/fs/cgroup"
CGV1 = "/run/pve-fake/cgroup"
# LXC's default allow list (lxc common.conf): mknod of any node, the basic character devices, ptys, fuse, tun
LXC_DEVICES = ["c *:* m", "b *:* m", "c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm", "c 1:8 rwm", "c 1:9 rwm", "c 5:0 rwm",
               "c 5:1 rwm", "c 5:2 rwm", "c 136:* rwm", "c 10:229 rwm", "c 10:200 rwm"]
USAGE = """USAGE: pct <COMMAND> [ARGS] [OPTIONS]

       pct config <vmid>
       pct exec <vmid> [<extra-args>]
       pct list
       pct shutdown <vmid> [OPTIONS]
       pct start <vmid>
       pct status <vmid> [OPTIONS]
       pct stop <vmid>
"""


def die(msg: str, code: int = 255) -> int:
    sys.stderr.write(msg.rstrip("\n") + "\n")
    return code


def lab() -> dict:
    try:
        with open(LAB_JSON, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {"node": socket.gethostname(), "containers": {}}


def node() -> str:
    return lab().get("node") or socket.gethostname()


def conf_path(vmid: str) -> str:
    return f"/etc/pve/lxc/{vmid}.conf"


def read_conf(vmid: str) -> dict | None:
    try:
        with open(conf_path(vmid), encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    out = {}
    for ln in text.splitlines():
        if ":" in ln and not ln.startswith("#") and not ln.startswith("["):
            k, v = ln.split(":", 1)
            out.setdefault(k.strip(), v.strip())
    return out


def conf_all(vmid: str, key: str) -> list[str]:
    """Every value of a repeated key (lxc.* lines)."""
    try:
        with open(conf_path(vmid), encoding="utf-8") as f:
            return [ln.split(":", 1)[1].strip() for ln in f if ln.split(":", 1)[0].strip() == key and ":" in ln]
    except FileNotFoundError:
        return []


def idmap(vmid: str) -> tuple[int, int] | None:
    """(host base, count) of an unprivileged container's uid map (lxc.idmap: u 0 100000 65536)."""
    if (read_conf(vmid) or {}).get("unprivileged") != "1":
        return None
    for v in conf_all(vmid, "lxc.idmap"):
        kind, inner, outer, count = v.split()
        if kind == "u" and inner == "0":
            return int(outer), int(count)
    return 100000, 65536


def v1_dir(ctrl: str) -> str | None:
    """The node's cgroup v1 hierarchy of a controller (mounted on first use), or None without one."""
    path = os.path.join(CGV1, ctrl)
    if not os.path.ismount(path):
        os.makedirs(path, exist_ok=True)
        if subprocess.run(["mount", "-t", "cgroup", "-o", ctrl, f"lab-{ctrl}", path], check=False,
                          stderr=subprocess.DEVNULL).returncode != 0:
            return None
    return path


def v1_write(path: str, name: str, value: str) -> None:
    with open(os.path.join(path, name), "w", encoding="utf-8") as f:
        f.write(value)


def set_limits(vmid: str) -> list[str]:
    """Make the container's v1 memory and devices cgroups and write its limits; -> their paths."""
    out = []
    mem, dev = v1_dir("memory"), v1_dir("devices")
    if mem:
        p = os.path.join(mem, "lxc", vmid)
        os.makedirs(p, exist_ok=True)
        limit = int((read_conf(vmid) or {}).get("memory", "512")) * 1048576
        v1_write(p, "memory.limit_in_bytes", str(limit))
        if os.path.exists(os.path.join(p, "memory.memsw.limit_in_bytes")):
            v1_write(p, "memory.memsw.limit_in_bytes", str(limit))   # swap: 0
        out.append(p)
    if dev:
        p = os.path.join(dev, "lxc", vmid)
        os.makedirs(p, exist_ok=True)
        v1_write(p, "devices.deny", "a")
        for rule in LXC_DEVICES + conf_all(vmid, "lxc.cgroup2.devices.allow"):
            v1_write(p, "devices.allow", rule)
        out.append(p)
    return out


def limit_dirs(vmid: str) -> list[str]:
    return [p for p in (os.path.join(CGV1, c, "lxc", vmid) for c in ("memory", "devices")) if os.path.isdir(p)]


def no_conf(vmid: str) -> int:
    return die(f"Configuration file 'nodes/{node()}/lxc/{vmid}.conf' does not exist")


def proc_start(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return None if fields[0] == "Z" else fields[19]
    except OSError:
        return None


def init_pid(vmid: str) -> int | None:
    try:
        with open(f"{RUN}/{vmid}.pid", encoding="utf-8") as f:
            pid, start = f.read().split()
    except (FileNotFoundError, ValueError):
        return None
    return int(pid) if proc_start(int(pid)) == start else None


def check_vmid(vmid: str) -> bool:
    return vmid.isdigit() and 100 <= int(vmid) <= 999999999


def cmd_list(args: list[str]) -> int:
    rows = []
    try:
        names = os.listdir("/etc/pve/lxc")
    except FileNotFoundError:
        names = []
    for n in names:
        if not n.endswith(".conf") or not n[:-5].isdigit():
            continue
        vmid = n[:-5]
        c = read_conf(vmid) or {}
        rows.append((int(vmid), "running" if init_pid(vmid) else "stopped", c.get("lock", ""),
                     c.get("hostname", f"CT{vmid}")))
    if rows:
        sys.stdout.write("%-10s %-10s %-12s %-20s\n" % ("VMID", "Status", "Lock", "Name"))
    for vmid, status, lock, name in sorted(rows):
        sys.stdout.write("%-10s %-10s %-12s %-20s\n" % (vmid, status, lock, name))
    return 0


def cg_bytes(path: str, key: str) -> int:
    try:
        with open(path, encoding="utf-8") as f:
            for ln in f:
                if ln.startswith(key):
                    return int(ln.split()[1])
    except OSError:
        pass
    return 0


def cmd_status(args: list[str]) -> int:
    verbose = False
    rest = []
    for a in args:
        if a in ("--verbose", "-verbose", "--verbose=1", "--verbose 1"):
            verbose = True
        elif a.startswith("--verbose="):
            verbose = a.split("=", 1)[1] not in ("0", "")
        else:
            rest.append(a)
    if len(rest) != 1:
        return die("400 not enough arguments\npct status <vmid> [OPTIONS]")
    vmid = rest[0]
    if not check_vmid(vmid):
        return die("400 Parameter verification failed.\nvmid: invalid format - value does not look like a valid VM ID\n\npct status <vmid> [OPTIONS]")
    c = read_conf(vmid)
    if c is None:
        return no_conf(vmid)
    pid = init_pid(vmid)
    status = "running" if pid else "stopped"
    if not verbose:
        print(f"status: {status}")
        return 0
    d = {"cpus": c.get("cores", "1"), "disk": 0, "diskread": 0, "diskwrite": 0,
         "maxdisk": 214748364800, "maxmem": int(c.get("memory", "512")) * 1048576,
         "maxswap": int(c.get("swap", "0")) * 1048576, "mem": 0, "name": c.get("hostname", f"CT{vmid}"),
         "netin": 0, "netout": 0, "status": status, "swap": 0, "type": "lxc", "uptime": 0, "vmid": vmid}
    if pid:
        d["pid"] = pid
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
            with open("/proc/uptime", encoding="utf-8") as f:
                up = float(f.read().split()[0])
            d["uptime"] = max(0, int(up - start_ticks / os.sysconf("SC_CLK_TCK")))
        except OSError:
            pass
    for k in sorted(d):
        print(f"{k}: {d[k]}")
    return 0


def cmd_config(args: list[str]) -> int:
    if not args:
        return die("400 not enough arguments\npct config <vmid> [OPTIONS]")
    vmid = args[0]
    if read_conf(vmid) is None:
        return no_conf(vmid)
    with open(conf_path(vmid), encoding="utf-8") as f:
        sys.stdout.write(f.read())
    return 0


def join_cgroup(rel: str) -> None:
    path = os.path.join(CG, rel)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "cgroup.procs"), "w", encoding="utf-8") as f:
        f.write("0")


def cmd_exec(args: list[str]) -> int:
    if not args:
        return die("400 not enough arguments\npct exec <vmid> [<extra-args>] [OPTIONS]")
    vmid, rest = args[0], args[1:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    elif any(a.startswith("-") for a in rest):
        bad = next(a for a in rest if a.startswith("-"))
        return die(f"Unknown option: {bad.lstrip('-')}\n400 unable to parse option\npct exec <vmid> [<extra-args>] [OPTIONS]")
    if read_conf(vmid) is None:
        return no_conf(vmid)
    pid = init_pid(vmid)
    if not pid:
        return die(f"container '{vmid}' not running!")
    if not rest:
        return die("missing command at /usr/share/perl5/PVE/CLI/pct.pm line 183.")
    join_cgroup(f"lxc/{vmid}/ns/.lxc")
    for p in limit_dirs(vmid):    # lxc-attach: the container's memory limit and devices list hold for it too
        v1_write(p, "cgroup.procs", "0")
    # lxc-attach: enter every namespace of the container's init (its user namespace too: uid 0 there); argv, no
    # shell; exit status passed through
    userns = ["-U"] if idmap(vmid) else []
    cp = subprocess.run(["nsenter", "-t", str(pid), *userns, "-m", "-u", "-i", "-n", "-p", "-C", "-r", "-w", "--",
                         *rest], check=False)
    rc = cp.returncode
    return 128 - rc if rc < 0 else rc


def cmd_start(args: list[str]) -> int:
    if not args:
        return die("400 not enough arguments\npct start <vmid> [OPTIONS]")
    vmid = args[0]
    if read_conf(vmid) is None:
        return no_conf(vmid)
    if init_pid(vmid):
        return die(f"CT {vmid} already running")
    c = lab().get("containers", {}).get(vmid)
    if not c:
        return die(f"TASK ERROR: lab: no boot recipe for CT {vmid} in {LAB_JSON}")
    os.makedirs(RUN, exist_ok=True)
    mondir = os.path.join(CG, "lxc.monitor", vmid)
    os.makedirs(mondir, exist_ok=True)
    os.makedirs(os.path.join(CG, "lxc", vmid, "ns"), exist_ok=True)
    os.makedirs(c["mnt"], exist_ok=True)
    ids = idmap(vmid)
    limits = []
    if ids:
        # LXC delegates an unprivileged container's cgroup to its root (systemd inside manages it)
        ns = os.path.join(CG, "lxc", vmid, "ns")
        for f in ("", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"):
            os.chown(os.path.join(ns, f), ids[0], ids[0])
        limits = set_limits(vmid)
        # the fake driver's state, shared with the containers: their holders' records are written there by the
        # container's root, uid 100000 on this node
        for d in c.get("share", "").split():
            if os.path.isdir(os.path.join(d, "procs")):
                os.chmod(os.path.join(d, "procs"), 0o1777)
    logf = open(os.path.join(os.path.dirname(c["mnt"]), "boot.log"), "ab")

    def pre():
        os.setsid()
        with open(os.path.join(CG, "lxc", vmid, "ns", "cgroup.procs"), "w", encoding="utf-8") as f:
            f.write("0")
        for lp in limits:
            v1_write(lp, "cgroup.procs", "0")

    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LAB_CONTAINER": "lxc", "LAB_SHARE": c.get("share", ""),
           "LAB_MLENV": "1" if c.get("mlenv") else ""}
    if ids:
        env.update(LAB_IDMAP=f"{ids[0]} {ids[1]}", LAB_LOWER=c["lower"])
    p = subprocess.Popen(["nsenter", f"--net={c['netns']}", "--", "unshare", "--pid", "--mount", "--uts", "--ipc",
                          "--cgroup", "--fork", "--", c["boot"], c["hostname"], c["mnt"], c["seed"], c["checkout"],
                          c["labdir"], "bind"], stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                         preexec_fn=pre, env=env)
    logf.close()
    child = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{p.pid}/task/{p.pid}/children", encoding="utf-8") as f:
                kids = f.read().split()
        except OSError:
            kids = []
        if kids:
            child = int(kids[0])
            break
        if p.poll() is not None:
            break
        time.sleep(0.01)
    if child:
        with open(os.path.join(mondir, "cgroup.procs"), "w", encoding="utf-8") as f:
            f.write(str(p.pid))
        while time.monotonic() < deadline and proc_start(child):
            try:
                if os.readlink(f"/proc/{child}/exe").endswith("/systemd"):
                    break
            except OSError:
                pass
            time.sleep(0.02)
    if not child or not proc_start(child):
        return die(f"startup for container '{vmid}' failed\nTASK ERROR: startup for container '{vmid}' failed")
    with open(f"{RUN}/{vmid}.pid.tmp", "w", encoding="utf-8") as f:
        f.write(f"{child} {proc_start(child)}\n")
    os.replace(f"{RUN}/{vmid}.pid.tmp", f"{RUN}/{vmid}.pid")
    return 0


def cleanup(vmid: str, pid: int, timeout: float = 10) -> None:
    end = time.monotonic() + timeout
    while proc_start(pid) and time.monotonic() < end:
        time.sleep(0.02)
    try:
        os.unlink(f"{RUN}/{vmid}.pid")
    except FileNotFoundError:
        pass
    base = os.path.join(CG, "lxc", vmid)
    for _attempt in range(100):
        try:
            for d, _sub, _f in sorted(os.walk(base, topdown=False), key=lambda t: -t[0].count("/")):
                os.rmdir(d)
            break
        except FileNotFoundError:
            break
        except OSError:
            time.sleep(0.05)
    try:
        os.rmdir(os.path.join(CG, "lxc.monitor", vmid))
    except OSError:
        pass
    for p in limit_dirs(vmid):
        for _attempt in range(100):
            try:
                os.rmdir(p)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)


def cmd_stop(args: list[str]) -> int:
    if not args:
        return die("400 not enough arguments\npct stop <vmid> [OPTIONS]")
    vmid = args[0]
    if read_conf(vmid) is None:
        return no_conf(vmid)
    pid = init_pid(vmid)
    if not pid:
        return die(f"CT {vmid} not running")
    os.kill(pid, signal.SIGKILL)          # lxc-stop --kill: the kernel ends the container's whole pid namespace
    cleanup(vmid, pid)
    return 0


def cmd_shutdown(args: list[str]) -> int:
    if not args:
        return die("400 not enough arguments\npct shutdown <vmid> [OPTIONS]")
    vmid, timeout, force = args[0], 60.0, False
    it = iter(args[1:])
    for a in it:
        k, _sep, v = a.partition("=")
        if k in ("--timeout", "-timeout"):
            timeout = float(v or next(it, "60"))
        elif k in ("--forceStop", "-forceStop"):
            force = (v or next(it, "1")) not in ("0", "")
    if read_conf(vmid) is None:
        return no_conf(vmid)
    pid = init_pid(vmid)
    if not pid:
        return die(f"CT {vmid} not running")
    os.kill(pid, signal.SIGRTMIN + 4)     # systemd: poweroff
    end = time.monotonic() + timeout
    while proc_start(pid) and time.monotonic() < end:
        time.sleep(0.1)
    if proc_start(pid):
        if not force:
            return die("TASK ERROR: container did not stop")
        os.kill(pid, signal.SIGKILL)
    cleanup(vmid, pid)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("help", "-h", "--help"):
        sys.stdout.write(USAGE) if argv else sys.stderr.write("ERROR: no command specified\n" + USAGE)
        return 0 if argv else 255
    cmds = {"list": cmd_list, "status": cmd_status, "config": cmd_config, "exec": cmd_exec, "start": cmd_start,
            "stop": cmd_stop, "shutdown": cmd_shutdown}
    if argv[0] not in cmds:
        return die(f"ERROR: unknown command 'pct {argv[0]}'\n" + USAGE)
    return cmds[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
