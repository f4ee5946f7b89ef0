"""The fake nvidia-smi against the second real H200 run (tests/data/h200-run, tests/gpu/gpu_check.yml).

No root, no lab: FAKEGPU_ROOT points at a temporary tree (fixtures of test_fakes_unit.py).
"""
import os
import re

from conftest import CHECKOUT
import test_fakes_unit
from test_fakes_unit import holder, set_config, smi

root = test_fakes_unit.root   # the fixture: FAKEGPU_ROOT in a temporary tree

RUN = os.path.join(CHECKOUT, "tests", "data", "h200-run", "raw")
RUN_NOW = "1795973278"   # Sun Nov 29 17:27:58 2026 UTC, the busy table's time


def real(phase, name):
    with open(os.path.join(RUN, f"{phase}-{name}.txt"), encoding="utf-8") as f:
        text = f.read()
    return text.split("# ---- stdout\n", 1)[1].split("# ---- stderr\n", 1)[0]


def same_shape(got, want, loose=("temperature",)):
    """Tables and CSV byte for byte, except the date line, the UUID and temperatures."""
    def norm(text):
        text = re.sub(r"GPU-[0-9a-f-]{36}", "UUID", text)
        text = re.sub(r"\|(\s+N/A\s+)\d+C", r"|\1NNC", text)
        text = re.sub(r"P0, \d+$", "P0, NN", text, flags=re.M)
        return text.splitlines()[1:] if text.startswith(("Sun", "Mon")) else text.splitlines()
    return norm(got) == norm(want)


def test_idle_table_and_power(root, monkeypatch):
    """A GPU without any CUDA context draws ~81 W (the fake said 120 W, a reading taken with a context)."""
    monkeypatch.setenv("FAKEGPU_NOW", RUN_NOW)
    set_config(root, model="sm90", count=1)
    assert same_shape(smi().stdout, real("1-idle", "table"))
    q = ["--query-gpu=index,name,uuid,pci.bus_id,compute_cap,driver_version,memory.used,memory.total,memory.free,"
         "power.draw,power.limit,utilization.gpu,pstate,temperature.gpu", "--format=csv"]
    got = smi(*q).stdout
    power = float(got.splitlines()[1].split(", ")[9].split()[0])
    assert abs(power - 81.31) < 5
    assert same_shape(re.sub(r"\d+\.\d\d W, 700", "W, 700", got), re.sub(r"\d+\.\d\d W, 700", "W, 700", real("1-idle", "query-gpu-csv")))


def test_busy_outputs(root, monkeypatch):
    """20 GiB from torch.empty showed as 21090 MiB for the process, 21099 MiB used, ~120 W at 0 %."""
    monkeypatch.setenv("FAKEGPU_NOW", RUN_NOW)
    set_config(root, model="sm90", count=1)
    p = holder(root, "0", 21090)
    try:
        table = smi().stdout.replace(f"{p.pid:>14}      C", f"{1132:>14}      C")
        apps = smi("--query-compute-apps=pid,process_name,used_memory,gpu_uuid,gpu_bus_id", "--format=csv").stdout
        used = smi("--query-gpu=memory.used,power.draw", "--format=csv,noheader,nounits").stdout
    finally:
        p.terminate()
        p.wait()
    want = real("2-busy-term", "table")
    # the power column differs by a few watts between machines (119 W here, 122 W there): compare the rest
    assert same_shape(re.sub(r"\d+W /", "W /", table), re.sub(r"\d+W /", "W /", want))
    assert same_shape(apps.replace(str(p.pid), "1132"), real("2-busy-term", "query-apps-csv"))
    mib, watts = used.strip().split(", ")
    assert mib == "21099" and abs(float(watts) - 122.12) < 5
