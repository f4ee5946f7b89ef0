#!/usr/bin/env python
"""Fake `nvidia-smi` for the lab (installed as /usr/bin/nvidia-smi in each GPU host's overlay).

Byte-compatible with the real 580.x output captured in tests/data/nvidia-smi-h200 for the forms used:
  nvidia-smi                                   plain table (GPUs + processes)
  nvidia-smi -L
  nvidia-smi --query-gpu=F1,F2 --format=csv[,noheader][,nounits] [-i IDX|UUID|BUSID[,..]]
  nvidia-smi --query-compute-apps=F1,.. --format=csv[,noheader][,nounits] [-i ..]
  nvidia-smi -q [-i ..]                        a short subset of the real -q report
  nvidia-smi --gpu-reset -i N                  only succeeds when nobody holds GPU N
State comes from fakegpu (config + flock-held records). The driver reports the holders' PIDs in the
node's pid namespace; inside a container (config "container") no process is listed while
memory.used still shows the memory held. FAKEGPU_NOW=<epoch seconds> fixes the timestamps (tests).
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fakegpu  # noqa: E402

INVALID_ARGS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
NO_DEVICES = "No devices were found\n"


def now() -> float:
    v = os.environ.get("FAKEGPU_NOW")
    return float(v) if v else time.time()


def _ts() -> str:
    t = now()
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(t)) + ".%03d" % int((t % 1) * 1000)


def _na(v):
    return "[N/A]" if v is None else v


# name -> (canonical header, unit or "", getter(gpu, cfg))
GPU_FIELDS = {
    "timestamp": ("timestamp", "", lambda g, c: _ts()),
    "driver_version": ("driver_version", "", lambda g, c: c["driver_version"]),
    "count": ("count", "", lambda g, c: str(c["count"])),
    "name": ("name", "", lambda g, c: c["name"]),
    "gpu_name": ("name", "", lambda g, c: c["name"]),
    "serial": ("serial", "", lambda g, c: g["serial"]),
    "gpu_serial": ("serial", "", lambda g, c: g["serial"]),
    "uuid": ("uuid", "", lambda g, c: g["uuid"]),
    "gpu_uuid": ("uuid", "", lambda g, c: g["uuid"]),
    "pci.bus_id": ("pci.bus_id", "", lambda g, c: g["bus_id"]),
    "gpu_bus_id": ("pci.bus_id", "", lambda g, c: g["bus_id"]),
    "index": ("index", "", lambda g, c: str(g["index"])),
    "minor_number": ("minor_number", "", lambda g, c: str(g["index"])),
    "compute_cap": ("compute_cap", "", lambda g, c: c["compute_cap"]),
    "persistence_mode": ("persistence_mode", "", lambda g, c: "Enabled"),
    "compute_mode": ("compute_mode", "", lambda g, c: "Default"),
    "mig.mode.current": ("mig.mode.current", "", lambda g, c: "Disabled"),
    "pstate": ("pstate", "", lambda g, c: g["pstate"]),
    "temperature.gpu": ("temperature.gpu", "", lambda g, c: str(g["temperature_c"])),
    "fan.speed": ("fan.speed [%]", " %", lambda g, c: None),
    "memory.total": ("memory.total [MiB]", " MiB", lambda g, c: str(g["memory_total_mib"])),
    "memory.reserved": ("memory.reserved [MiB]", " MiB", lambda g, c: str(g["memory_reserved_mib"])),
    "memory.used": ("memory.used [MiB]", " MiB", lambda g, c: str(g["memory_used_mib"])),
    "memory.free": ("memory.free [MiB]", " MiB", lambda g, c: str(g["memory_free_mib"])),
    "utilization.gpu": ("utilization.gpu [%]", " %", lambda g, c: str(g["utilization_pct"])),
    "utilization.memory": ("utilization.memory [%]", " %", lambda g, c: str(g["memory_util_pct"])),
    "power.draw": ("power.draw [W]", " W", lambda g, c: "%.2f" % g["power_draw_w"]),
    "power.draw.average": ("power.draw.average [W]", " W", lambda g, c: "%.2f" % g["power_draw_w"]),
    "power.draw.instant": ("power.draw.instant [W]", " W", lambda g, c: "%.2f" % g["power_draw_w"]),
    "power.limit": ("power.limit [W]", " W", lambda g, c: "%.2f" % g["power_limit_w"]),
    "enforced.power.limit": ("enforced.power.limit [W]", " W", lambda g, c: "%.2f" % g["power_limit_w"]),
    "power.default_limit": ("power.default_limit [W]", " W", lambda g, c: "%.2f" % g["power_limit_w"]),
    "power.max_limit": ("power.max_limit [W]", " W", lambda g, c: "%.2f" % g["power_limit_w"]),
    "vbios_version": ("vbios_version", "", lambda g, c: "96.00.A5.00.1A"),
}
GPU_FIELDS["gpu_index"] = GPU_FIELDS["index"]

# name -> (header, unit, getter(row, cfg)); row = {"gpu": gpu_state entry, "pid": int, "name": str, "mib": int}
APP_FIELDS = {
    "timestamp": ("timestamp", "", lambda r, c: _ts()),
    "gpu_name": ("gpu_name", "", lambda r, c: c["name"]),
    "gpu_bus_id": ("gpu_bus_id", "", lambda r, c: r["gpu"]["bus_id"]),
    "gpu_serial": ("gpu_serial", "", lambda r, c: r["gpu"]["serial"]),
    "gpu_uuid": ("gpu_uuid", "", lambda r, c: r["gpu"]["uuid"]),
    "pid": ("pid", "", lambda r, c: str(r["pid"])),
    "process_name": ("process_name", "", lambda r, c: r["name"]),
    "name": ("process_name", "", lambda r, c: r["name"]),
    "used_memory": ("used_gpu_memory [MiB]", " MiB", lambda r, c: str(r["mib"])),
    "used_gpu_memory": ("used_gpu_memory [MiB]", " MiB", lambda r, c: str(r["mib"])),
}


class Usage(Exception):
    def __init__(self, msg: str, code: int = 2):
        super().__init__(msg)
        self.msg, self.code = msg, code


def parse_args(argv: list[str]) -> dict:
    o = {"query_gpu": None, "query_apps": None, "format": None, "ids": None, "list": False, "q": False,
         "reset": False, "help": False}
    it = iter(argv)
    for a in it:
        key, eq, val = a.partition("=")
        if key in ("--query-gpu", "--query-compute-apps", "--format", "--id", "-i", "--display", "-d"):
            if not eq:
                val = next(it, None)
                if val is None:
                    raise Usage(INVALID_ARGS)
            if key == "--query-gpu":
                o["query_gpu"] = val
            elif key == "--query-compute-apps":
                o["query_apps"] = val
            elif key == "--format":
                o["format"] = val
            elif key in ("--id", "-i"):
                o["ids"] = val
        elif a in ("-L", "--list-gpus"):
            o["list"] = True
        elif a in ("-q", "--query"):
            o["q"] = True
        elif a in ("-r", "--gpu-reset"):
            o["reset"] = True
        elif a in ("-h", "--help"):
            o["help"] = True
        else:
            raise Usage(INVALID_ARGS)
    if o["query_gpu"] and o["query_apps"]:
        raise Usage(INVALID_ARGS)
    if (o["query_gpu"] or o["query_apps"]) and not o["format"]:
        raise Usage("Please specify the format with --format. Supported formats: csv\n" + INVALID_ARGS)
    return o


def select(gpus: list[dict], ids: str | None) -> list[dict]:
    if ids is None:
        return gpus
    out = []
    for tok in ids.split(","):
        tok = tok.strip()
        hit = [g for g in gpus if tok == str(g["index"]) or tok.upper() == g["uuid"].upper()
               or tok.upper() == g["bus_id"].upper()
               or (":" in tok and g["bus_id"].upper().endswith(tok.upper()))]
        if not hit:
            raise Usage(NO_DEVICES, 6)
        out.extend(h for h in hit if h not in out)
    return out


def csv_out(fields: list[str], table: dict, rows: list, cfg: dict, fmt: str) -> str:
    opts = [x.strip() for x in fmt.split(",")]
    if opts[0] != "csv" or any(x not in ("csv", "noheader", "nounits") for x in opts):
        raise Usage(f'"{fmt}" is not a valid format.\n' + INVALID_ARGS)
    for f in fields:
        if f not in table:
            raise Usage(f'Field "{f}" is not a valid field to query.\n\n')
    lines = []
    if "noheader" not in opts:
        lines.append(", ".join(table[f][0] for f in fields))
    for r in rows:
        vals = []
        for f in fields:
            _h, unit, get = table[f]
            v = get(r, cfg)
            if v is None:
                vals.append("[N/A]")
            else:
                vals.append(v + ("" if "nounits" in opts else unit))
        lines.append(", ".join(vals))
    return "".join(ln + "\n" for ln in lines)


def processes(state: list[dict], cfg: dict) -> list[dict]:
    """Compute apps as the driver reports them: node PIDs; none visible inside a container."""
    if cfg.get("container"):
        return []
    rows = []
    my_ns = fakegpu._pidns_inode()
    for g in state:
        for rec in g["holders"]:
            pid = fakegpu.resolve_pid(rec, my_ns)
            if pid is None:
                continue
            rows.append({"gpu": g, "pid": pid, "name": rec.get("name") or "python3", "mib": int(rec["gpus"][str(g["index"])])})
    rows.sort(key=lambda r: (r["gpu"]["index"], r["pid"]))
    return rows


def table(state: list[dict], cfg: dict) -> str:
    sep = "+-----------------------------------------+------------------------+----------------------+"
    wide = "+-----------------------------------------------------------------------------------------+"
    out = [time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(now())) + "       ", wide]
    hdr = f"NVIDIA-SMI {cfg['driver_version']}"
    drv = f"Driver Version: {cfg['driver_version']}"
    cuda = f"CUDA Version: {cfg['cuda_version']}"
    out.append(f"| {hdr:<33} {drv:<30} {cuda:<22} |")
    out += [sep,
            "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
            "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
            "|                                         |                        |               MIG M. |",
            "|" + sep[1:-1].replace("-", "=") + "|"]
    for g in state:
        name = cfg["name"] if len(cfg["name"]) <= 27 else cfg["name"][:24] + "..."
        out.append(f"| {g['index']:>3}  {name:<31}On  |   {g['bus_id']} Off |{'0':>21} |")
        out.append(f"| N/A  {g['temperature_c']:>3}C    {g['pstate']}{int(g['power_avg_w']):>15}W / "
                   f"{round(g['power_limit_w']):>4}W |{g['memory_used_mib']:>8}MiB / {g['memory_total_mib']:>6}MiB |"
                   f"{g['utilization_pct']:>7}%      Default |")
        out.append(f"|{'':41}|{'':24}|{'Disabled':>21} |")
        out.append(sep)
    out += ["", wide,
            "| Processes:                                                                              |",
            "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
            "|        ID   ID                                                               Usage      |",
            "|" + wide[1:-1].replace("-", "=") + "|"]
    rows = processes(state, cfg)
    if not rows:
        out.append("|  No running processes found                                                             |")
    for r in rows:
        nm = r["name"] if len(r["name"]) <= 36 else "..." + r["name"][-33:]
        out.append(f"|  {r['gpu']['index']:>3}   N/A  N/A  {r['pid']:>14}      C   {nm:<36}{r['mib']:>7}MiB |")
    out.append(wide)
    return "\n".join(out) + "\n"


def q_report(state: list[dict], cfg: dict) -> str:
    def kv(indent: int, k: str, v="") -> str:
        pad = " " * indent
        return f"{pad}{k:<{55 - indent}}: {v}" if v != "" else f"{pad}{k}"
    out = ["", "==============NVSMI LOG==============", "",
           kv(0, "Timestamp", time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(now()))),
           kv(0, "Driver Version", cfg["driver_version"]), kv(0, "CUDA Version", cfg["cuda_version"]), "",
           kv(0, "Attached GPUs", str(cfg["count"]))]
    procs = processes(state, cfg)
    for g in state:
        out += [f"GPU {g['bus_id']}", kv(4, "Product Name", cfg["name"]), kv(4, "Product Brand", "NVIDIA"),
                kv(4, "Product Architecture", cfg.get("product_architecture", "N/A")),
                kv(4, "Persistence Mode", "Enabled"), kv(4, "Serial Number", g["serial"]),
                kv(4, "GPU UUID", g["uuid"]), kv(4, "Minor Number", str(g["index"])),
                kv(4, "PCI"), kv(8, "Bus Id", g["bus_id"]), kv(4, "Fan Speed", "N/A"),
                kv(4, "Performance State", g["pstate"]),
                kv(4, "FB Memory Usage"), kv(8, "Total", f"{g['memory_total_mib']} MiB"),
                kv(8, "Reserved", f"{g['memory_reserved_mib']} MiB"), kv(8, "Used", f"{g['memory_used_mib']} MiB"),
                kv(8, "Free", f"{g['memory_free_mib']} MiB"), kv(4, "Compute Mode", "Default"),
                kv(4, "Utilization"), kv(8, "GPU", f"{g['utilization_pct']} %"),
                kv(8, "Memory", f"{g['memory_util_pct']} %"),
                kv(4, "Temperature"), kv(8, "GPU Current Temp", f"{g['temperature_c']} C"),
                kv(4, "GPU Power Readings"), kv(8, "Average Power Draw", "%.2f W" % g["power_avg_w"]),
                kv(8, "Instantaneous Power Draw", "%.2f W" % g["power_draw_w"]),
                kv(8, "Current Power Limit", "%.2f W" % g["power_limit_w"])]
        mine = [r for r in procs if r["gpu"]["index"] == g["index"]]
        if not mine:
            out.append(kv(4, "Processes", "None"))
        else:
            out.append(kv(4, "Processes"))
            for r in mine:
                out += [kv(8, "GPU instance ID", "N/A"), kv(8, "Compute instance ID", "N/A"),
                        kv(8, "Process ID", str(r["pid"])), kv(8, "Process Type", "C"),
                        kv(8, "Name", r["name"]), kv(8, "Used GPU Memory", f"{r['mib']} MiB")]
        out.append("")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        o = parse_args(argv)
        cfg = fakegpu.load_config()
        if not os.path.exists(fakegpu.dev_path("nvidiactl")) and not os.environ.get("FAKEGPU_ROOT"):
            sys.stdout.write("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                             "Make sure that the latest NVIDIA driver is installed and running.\n\n")
            return 9
        if o["help"]:
            sys.stdout.write(__doc__)
            return 0
        state = fakegpu.gpu_state(cfg)
        sel = select(state, o["ids"])
        if o["reset"]:
            if o["ids"] is None:
                raise Usage(INVALID_ARGS)
            busy = [g for g in sel if g["holders"]]
            if busy:
                sys.stdout.write("The following GPUs could not be reset:\n" + "".join(
                    f"  GPU {g['bus_id']}: In use by another client\n" for g in busy) + "\n")
                return 255
            sys.stdout.write("".join(f"GPU {g['bus_id']} was successfully reset.\n" for g in sel))
            return 0
        if o["query_gpu"]:
            fields = [f.strip() for f in o["query_gpu"].split(",") if f.strip()]
            sys.stdout.write(csv_out(fields, GPU_FIELDS, sel, cfg, o["format"]))
            return 0
        if o["query_apps"]:
            fields = [f.strip() for f in o["query_apps"].split(",") if f.strip()]
            idx = {g["index"] for g in sel}
            rows = [r for r in processes(state, cfg) if r["gpu"]["index"] in idx]
            sys.stdout.write(csv_out(fields, APP_FIELDS, rows, cfg, o["format"]))
            return 0
        if o["list"]:
            sys.stdout.write("".join(f"GPU {g['index']}: {cfg['name']} (UUID: {g['uuid']})\n" for g in sel))
            return 0
        if o["q"]:
            sys.stdout.write(q_report(sel, cfg))
            return 0
        sys.stdout.write(table(sel, cfg))
        return 0
    except Usage as e:
        sys.stdout.write(e.msg)
        return e.code
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
