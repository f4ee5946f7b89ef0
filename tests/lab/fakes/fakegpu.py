#!/usr/bin/env python
"""Fake GPU "driver" state for the lab's mock hosts (stdlib only).

Stable API (the fake SGLang and the tests import it)::

    import sys; sys.path.insert(0, "<checkout>/tests/lab/fakes")
    import fakegpu
    h = fakegpu.hold({0: 20000, 1: 20000}, name="python3")   # MiB per GPU index
    h.set_busy(True)     # utilization 100 %, power ~55 % of the limit while busy
    h.release()          # or just exit: the kernel drops the flock, memory is "freed"

How it works: ``hold()`` writes a JSON record under ``<root>/var/lib/fakegpu/procs/`` and keeps an
``flock`` on it for the life of the process (and of its fork children, which share the open file).
Readers (the fake ``nvidia-smi``) garbage-collect records whose lock can be taken: the holder died, so
its memory is free, like the real driver. ``hold()`` also opens ``<root>/dev/nvidiaN``,
``<root>/dev/nvidiactl`` and ``<root>/dev/nvidia-uvm`` so ``fuser -v /dev/nvidia*`` sees the process.

``FAKEGPU_ROOT`` (env) prefixes every path (``/etc/fakegpu``, ``/var/lib/fakegpu``, ``/dev``) so all of
this can run outside a lab host (unit tests).

Config: ``<root>/etc/fakegpu/config.json`` (see ``make_config``). ``"container": {"vmid": 129}`` marks
a container view: nvidia-smi there lists no processes (the driver reports node PIDs it cannot
resolve) while memory.used still shows what is held.

CLI::

    fakegpu.py hold --gpus 0-7 --mib 20000 [--name python3] [--ignore-sigterm] [--busy] [--seconds N]
    fakegpu.py config --model sm120|sm100|sm90 [--count 8] [--host gpu01] [--vmid 129]
    fakegpu.py status            # JSON: per-GPU state + live records
"""
from __future__ import annotations

import argparse
import ctypes
import errno
import fcntl
import json
import os
import signal
import sys
import tempfile
import time
import uuid

__all__ = ["MODELS", "Holder", "hold", "root", "config_path", "procs_dir", "load_config", "make_config",
           "records", "gpu_state", "resolve_pid", "parse_gpu_list", "visible_gpus", "physical_gpu"]

# Values per model. H200 ones come from the real capture (tests/data/nvidia-smi-h200); the others are
# the public specs (memory as nvidia-smi reports it) with plausible idle readings.
MODELS = {
    "sm120": {
        "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "compute_cap": "12.0", "arch": "sm120",
        "memory_total_mib": 97887, "memory_reserved_mib": 503, "power_limit_w": 600.0,
        "idle_power_w": 31.45, "idle_temp_c": 33, "pstate_idle": "P8", "product_architecture": "Blackwell",
    },
    "sm100": {
        "name": "NVIDIA B200", "compute_cap": "10.0", "arch": "sm100",
        "memory_total_mib": 183359, "memory_reserved_mib": 716, "power_limit_w": 1000.0,
        "idle_power_w": 143.12, "idle_temp_c": 35, "pstate_idle": "P0", "product_architecture": "Blackwell",
    },
    "sm90": {
        "name": "NVIDIA H200", "compute_cap": "9.0", "arch": "sm90",
        "memory_total_mib": 143771, "memory_reserved_mib": 615, "power_limit_w": 700.0,
        "idle_power_w": 120.30, "idle_power_avg_w": 119.80, "idle_temp_c": 38, "pstate_idle": "P0", "product_architecture": "Hopper",
        # no CUDA context at all: ~81 W on a real H200 (tests/data/h200-run); 120 W is with a context at 0 %
        "no_context_power_w": 81.31,
    },
}
ALIASES = {"rtx6000": "sm120", "rtxpro6000": "sm120", "b200": "sm100", "h200": "sm90",
           "12.0": "sm120", "10.0": "sm100", "9.0": "sm90"}
BUS_IDS = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
           "00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0"]
CONTEXT_OVERHEAD_MIB = 9      # memory.used exceeds the sum of the processes by this much (capture: 21265 vs 21256)
BUSY_POWER_FRACTION = 0.55


def root() -> str:
    return os.environ.get("FAKEGPU_ROOT", "").rstrip("/")


def config_path() -> str:
    return root() + "/etc/fakegpu/config.json"


def procs_dir() -> str:
    return root() + "/var/lib/fakegpu/procs"


def dev_path(name: str) -> str:
    return root() + "/dev/" + name


def make_config(model: str = "sm120", count: int = 8, host: str = "gpu01", vmid: int | None = None,
                driver: str = "580.159.04", cuda: str = "13.0") -> dict:
    """Build a config dict (what labctl writes to /etc/fakegpu/config.json)."""
    key = ALIASES.get(model.lower(), model.lower())
    if key not in MODELS:
        raise ValueError(f"unknown GPU model {model!r}; known: {', '.join(MODELS)}")
    m = dict(MODELS[key])
    gpus = []
    for i in range(count):
        u = uuid.uuid5(uuid.NAMESPACE_DNS, f"{host}.gpu{i}.{key}.llmserve-lab")
        gpus.append({"index": i, "uuid": f"GPU-{u}", "bus_id": BUS_IDS[i % len(BUS_IDS)] if count > 1 or key != "sm90"
                     else "00000000:00:06.0", "serial": str(1653724048864 + i), "minor": i})
    if key == "sm90" and count == 1:           # exactly the captured card
        gpus[0]["uuid"] = "GPU-a4fbce9b-25f7-f038-11e1-b07ee93c4d63"
    cfg = {"model": key, **m, "count": count, "driver_version": driver, "cuda_version": cuda, "gpus": gpus,
           "persistence_mode": "On", "compute_mode": "Default", "host": host}
    if vmid is not None:
        cfg["container"] = {"vmid": int(vmid)}
    return cfg


def load_config() -> dict:
    try:
        with open(config_path(), encoding="utf-8") as f:
            cfg = json.load(f)
    except FileNotFoundError:
        cfg = make_config()
    base = make_config(cfg.get("model", "sm120"), int(cfg.get("count", 8)), cfg.get("host", "gpu01"))
    base.update(cfg)
    return base


def parse_gpu_list(text: str) -> list[int]:
    """'0-3,6' -> [0, 1, 2, 3, 6]"""
    out: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def visible_gpus(cfg: dict | None = None, value: str | None = None) -> list[int]:
    """The physical GPU indices a CUDA process sees, in CUDA ordinal order, as the driver reads
    ``CUDA_VISIBLE_DEVICES`` (``value``; the environment's when None): unset means every GPU; a comma-separated
    list of indices or UUIDs (a unique UUID prefix is enough); the list ends at the first entry that names no
    GPU or names one a second time (what follows is ignored); an empty value hides every GPU."""
    cfg = cfg or load_config()
    gpus = cfg.get("gpus") or []
    if value is None:
        value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return [int(g["index"]) for g in gpus]
    out: list[int] = []
    for part in value.split(","):
        part = part.strip()
        if part.isdigit():
            found = [int(g["index"]) for g in gpus if int(g["index"]) == int(part)]
        elif part.startswith(("GPU-", "MIG-")):
            found = [int(g["index"]) for g in gpus if str(g.get("uuid", "")).lower().startswith(part.lower())]
        else:
            found = []
        if len(found) != 1 or found[0] in out:
            break
        out.append(found[0])
    return out


def physical_gpu(ordinal: int, cfg: dict | None = None, value: str | None = None) -> int:
    """The physical index of CUDA device ``ordinal`` (raises IndexError like cudaSetDevice's invalid device)."""
    visible = visible_gpus(cfg, value)
    if not 0 <= int(ordinal) < len(visible):
        raise IndexError("invalid device ordinal %s (visible GPUs: %s)" % (ordinal, visible))
    return visible[int(ordinal)]


def _pidns_inode(pid: str | int = "self") -> int | None:
    try:
        link = os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None
    return int(link.split("[", 1)[1].rstrip("]"))


class Holder:
    """A live GPU memory reservation; keep the object (or just the process) alive to keep the memory."""

    def __init__(self, gpus: dict[int, int], name: str | None = None, busy: bool = False,
                 open_devices: bool = True):
        cfg = load_config()
        count = int(cfg["count"])
        self.gpus = {int(k): int(v) for k, v in gpus.items()}
        for idx in self.gpus:
            if idx < 0 or idx >= count:
                raise ValueError(f"GPU index {idx} out of range (this host has {count})")
        if name is None:
            try:
                with open("/proc/self/comm", encoding="utf-8") as f:
                    name = f.read().strip()
            except OSError:
                name = "python3"
        self.name = name
        self.busy = bool(busy)
        self.pid = os.getpid()
        self._fds: list[int] = []
        d = procs_dir()
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".rec-", dir=d)
        os.fchmod(fd, 0o644)   # every root on the node reads it, an unprivileged container's (uid 100000) too
        fcntl.flock(fd, fcntl.LOCK_EX)
        self._fd = fd
        self.path = os.path.join(d, f"{self.pid}-{uuid.uuid4().hex[:8]}.json")
        self._write()
        os.rename(tmp, self.path)
        if open_devices:
            for n in [f"nvidia{i}" for i in sorted(self.gpus)] + ["nvidiactl", "nvidia-uvm"]:
                try:
                    self._fds.append(os.open(dev_path(n), os.O_RDWR))
                except OSError:
                    pass

    def record(self) -> dict:
        return {"pid": self.pid, "pidns": _pidns_inode(), "name": self.name, "busy": self.busy,
                "gpus": {str(k): v for k, v in self.gpus.items()}, "since": time.time()}

    def _write(self) -> None:
        data = json.dumps(self.record()).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def set_busy(self, busy: bool = True) -> None:
        self.busy = bool(busy)
        self._write()

    def release(self) -> None:
        """Free the memory now (also happens when the process dies)."""
        if self._fd is None:
            return
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        os.close(self._fd)
        self._fd = None
        for fd in self._fds:
            os.close(fd)
        self._fds = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def hold(gpus: dict[int, int], name: str | None = None, busy: bool = False, open_devices: bool = True) -> Holder:
    """Reserve ``gpus`` = {index: MiB} for this process's life. Returns a Holder (set_busy, release)."""
    return Holder(gpus, name=name, busy=busy, open_devices=open_devices)


def records(gc: bool = True) -> list[dict]:
    """Live records (lock still held). With ``gc`` delete the dead ones."""
    out = []
    d = procs_dir()
    try:
        names = sorted(os.listdir(d))
    except FileNotFoundError:
        return out
    for n in names:
        if not n.endswith(".json"):
            continue
        p = os.path.join(d, n)
        try:
            fd = os.open(p, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                alive = False
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                alive = True
            if not alive:
                if gc:
                    try:
                        os.unlink(p)
                    except OSError:
                        pass
                continue
            rec = None
            for _attempt in range(5):
                try:
                    rec = json.loads(os.pread(fd, 1 << 16, 0) or b"null")
                    break
                except ValueError:
                    time.sleep(0.005)
            if rec:
                rec["path"] = p
                out.append(rec)
        finally:
            os.close(fd)
    return out


def resolve_pid(rec: dict, my_ns: int | None = None) -> int | None:
    """The record's holder as a PID of the reader's pid namespace (None: not visible from here)."""
    my_ns = _pidns_inode() if my_ns is None else my_ns
    if rec.get("pidns") in (None, my_ns):
        return int(rec["pid"])
    for ent in os.listdir("/proc"):
        if not ent.isdigit():
            continue
        if _pidns_inode(ent) != rec["pidns"]:
            continue
        try:
            with open(f"/proc/{ent}/status", encoding="utf-8") as f:
                for line in f:
                    if line.startswith("NSpid:"):
                        if int(line.split()[-1]) == int(rec["pid"]):
                            return int(ent)
                        break
        except OSError:
            continue
    return None


def gpu_state(cfg: dict | None = None, recs: list[dict] | None = None) -> list[dict]:
    """Per GPU: index, uuid, bus_id, used/free/total MiB, utilization, power, temperature, pstate."""
    cfg = cfg or load_config()
    recs = records() if recs is None else recs
    out = []
    for g in cfg["gpus"][: int(cfg["count"])]:
        i = g["index"]
        held = [r for r in recs if str(i) in r.get("gpus", {})]
        used = sum(int(r["gpus"][str(i)]) for r in held)
        if held:
            used += CONTEXT_OVERHEAD_MIB
        total = int(cfg["memory_total_mib"])
        used = min(used, total - int(cfg["memory_reserved_mib"]))
        busy = any(r.get("busy") for r in held)
        limit = float(cfg["power_limit_w"])
        idle_w = float(cfg["idle_power_w"] if held else cfg.get("no_context_power_w", cfg["idle_power_w"]))
        power = round(limit * BUSY_POWER_FRACTION + 0.37 * i, 2) if busy else (
            round(idle_w, 2))
        out.append({
            **g, "memory_used_mib": used, "memory_total_mib": total,
            "memory_reserved_mib": int(cfg["memory_reserved_mib"]),
            "memory_free_mib": total - used - int(cfg["memory_reserved_mib"]),
            "utilization_pct": 100 if busy else 0, "memory_util_pct": 37 if busy else 0,
            "power_draw_w": power, "power_limit_w": limit,
            "power_avg_w": power if busy or not held else float(cfg.get("idle_power_avg_w", idle_w)),
            "temperature_c": int(cfg["idle_temp_c"]) + (29 if busy else 0),
            "pstate": "P0" if held else cfg.get("pstate_idle", "P0"),
            "holders": held,
        })
    return out


def _set_comm(name: str) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)     # PR_SET_NAME
    except Exception:                                   # noqa: BLE001 - cosmetic only
        pass


def _cli(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fakegpu.py", description="fake GPU driver state for the lab")
    sub = ap.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("hold", help="hold GPU memory until killed (a GPU-process stand-in)")
    h.add_argument("--gpus", default="0", help="GPU indexes: 0-7 or 0,2")
    h.add_argument("--mib", type=int, default=20000, help="MiB per GPU")
    h.add_argument("--name", default=None, help="process name shown by nvidia-smi/fuser/ps (comm)")
    h.add_argument("--ignore-sigterm", action="store_true", help="survive SIGTERM (needs SIGKILL)")
    h.add_argument("--busy", action="store_true", help="report 100 %% utilization")
    h.add_argument("--seconds", type=float, default=0, help="exit after N seconds (0: forever)")
    h.add_argument("--ready-file", default=None, help="touch this file once the memory is held")
    c = sub.add_parser("config", help="print a config.json")
    c.add_argument("--model", default="sm120")
    c.add_argument("--count", type=int, default=8)
    c.add_argument("--host", default="gpu01")
    c.add_argument("--vmid", type=int, default=None)
    sub.add_parser("status", help="JSON of the GPU state and live records")
    a = ap.parse_args(argv)
    if a.cmd == "config":
        print(json.dumps(make_config(a.model, a.count, a.host, a.vmid), indent=2))
        return 0
    if a.cmd == "status":
        st = gpu_state()
        print(json.dumps(st, indent=2))
        return 0
    if a.name:
        _set_comm(a.name)
    if a.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    holder = hold({i: a.mib for i in parse_gpu_list(a.gpus)}, name=a.name, busy=a.busy)
    if a.ready_file:
        with open(a.ready_file, "w", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
    sys.stdout.write(f"holding {a.mib} MiB on GPUs {a.gpus} as pid {os.getpid()} ({holder.path})\n")
    sys.stdout.flush()
    deadline = time.monotonic() + a.seconds if a.seconds > 0 else None
    while deadline is None or time.monotonic() < deadline:
        time.sleep(0.5 if deadline is None else max(0.0, min(0.5, deadline - time.monotonic())))
    holder.release()
    return 0


if __name__ == "__main__":
    sys.exit(_cli())
