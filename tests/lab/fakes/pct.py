#!/usr/bin/env python
"""Fake Proxmox `pct` for the lab's node (installed as /usr/sbin/pct on pve01).

Formats, errors and exit codes follow Proxmox's pct (see tests/lab/README.md, "pct"):
  pct list | pct status VMID [--verbose] | pct config VMID | pct exec VMID -- CMD [ARGS...]
  pct start VMID | pct stop VMID | pct shutdown VMID [--timeout N] [--forceStop 0|1]
Containers are the ones in /etc/pve/lxc/*.conf; how to boot one is in /etc/pve-fake/lab.json
(written by labctl). A running container's init PID (this node's PID) is in /run/pve-fake/lxc/VMID.pid.
The container's processes live in cgroup /lxc/VMID/ns/... (pct exec children in /lxc/VMID/ns/.lxc),
the start helper in /lxc.monitor/VMID, as on a real node.
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
    # lxc-attach: enter every namespace of the container's init; argv, no shell; exit status passed through
    cp = subprocess.run(["nsenter", "-t", str(pid), "-m", "-u", "-i", "-n", "-p", "-C", "-r", "-w", "--", *rest], check=False)
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
    logf = open(os.path.join(os.path.dirname(c["mnt"]), "boot.log"), "ab")

    def pre():
        os.setsid()
        with open(os.path.join(CG, "lxc", vmid, "ns", "cgroup.procs"), "w", encoding="utf-8") as f:
            f.write("0")

    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LAB_CONTAINER": "lxc", "LAB_SHARE": c.get("share", ""),
           "LAB_MLENV": "1" if c.get("mlenv") else ""}
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
