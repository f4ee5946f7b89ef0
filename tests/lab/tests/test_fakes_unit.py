"""Unit tests of the fakes, without the lab: FAKEGPU_ROOT points at a temporary tree (no root needed)."""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import CHECKOUT, FAKES

CAPTURES = os.path.join(CHECKOUT, "tests", "data", "nvidia-smi-h200")
PY = sys.executable
CAPTURE_NOW = "1795971059"   # Sun Nov 29 16:50:59 2026 in UTC


def capture_cmds():
    """The `$ nvidia-smi ...` commands and outputs from the capture README."""
    with open(os.path.join(CAPTURES, "README.md"), encoding="utf-8") as f:
        text = f.read()
    out, cur = [], None
    for ln in text.split("```", 2)[1].splitlines():
        if ln.startswith("$ nvidia-smi"):
            cur = [ln[2:].split("#")[0].split(), []]
            out.append(cur)
        elif ln.startswith("$ "):
            cur = None
        elif cur is not None and ln.strip():
            cur[1].append(ln)
    return out


@pytest.fixture()
def root(tmp_path, monkeypatch):
    (tmp_path / "etc/fakegpu").mkdir(parents=True)
    (tmp_path / "dev").mkdir()
    for n in ["nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"]:
        (tmp_path / "dev" / n).touch()
    monkeypatch.setenv("FAKEGPU_ROOT", str(tmp_path))
    monkeypatch.setenv("FAKEGPU_NOW", CAPTURE_NOW)
    monkeypatch.setenv("TZ", "UTC")
    return tmp_path


def set_config(root, **kw):
    import fakegpu
    (root / "etc/fakegpu/config.json").write_text(json.dumps(fakegpu.make_config(**kw)))


def smi(*args, check=True):
    cp = subprocess.run([PY, os.path.join(FAKES, "nvidia_smi.py"), *args], capture_output=True, text=True, check=False)
    if check:
        assert cp.returncode == 0, cp.stdout + cp.stderr
    return cp


def holder(root, gpus="0", mib=21256, *extra):
    ready = root / f"ready-{time.monotonic_ns()}"
    p = subprocess.Popen([PY, os.path.join(FAKES, "fakegpu.py"), "hold", "--gpus", gpus, "--mib", str(mib),
                          "--name", "python3", "--ready-file", str(ready), *extra], stdout=subprocess.DEVNULL)
    for _attempt in range(200):
        if ready.exists() and ready.read_text().strip():
            return p
        time.sleep(0.01)
    p.kill()
    raise AssertionError("holder did not start")


def modulo_values(line):
    """Header lines must match byte for byte; value lines by shape (same fields, same units)."""
    import re
    return re.sub(r"\d+(\.\d+)?", "N", re.sub(r"GPU-[0-9a-f-]+", "UUID", line))


def test_capture_commands_match_on_a_1gpu_h200(root):
    set_config(root, model="sm90", count=1)
    p = holder(root)
    try:
        for argv, expected in capture_cmds():
            if "--query-compute-apps=pid,used_memory" in argv and "noheader" not in argv[-1]:
                continue   # the "no process left" case, checked below
            got = smi(*argv[1:]).stdout.splitlines()
            assert len(got) == len(expected), (argv, got)
            for g, e in zip(got, expected):
                if not g[:1].isdigit():
                    assert g == e, argv
                else:
                    assert modulo_values(g) == modulo_values(e), (argv, g, e)
    finally:
        p.terminate()
        p.wait()
    assert smi("--query-compute-apps=pid,used_memory", "--format=csv").stdout == "pid, used_gpu_memory [MiB]\n"
    assert smi("--query-gpu=index,memory.used", "--format=csv,noheader").stdout == "0, 0 MiB\n"


def test_table_matches_capture_byte_for_byte(root):
    set_config(root, model="sm90", count=1)
    p = holder(root)
    try:
        out = smi().stdout
    finally:
        p.terminate()
        p.wait()
    with open(os.path.join(CAPTURES, "nvidia-smi-busy.txt"), encoding="utf-8") as f:
        want = f.read()
    assert out.replace(f"{p.pid:>14}      C", f"{419:>14}      C") == want


def test_models_and_8_gpus(root):
    for model, name, cap, total in [("sm120", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", 97887),
                                    ("sm100", "NVIDIA B200", "10.0", 183359), ("sm90", "NVIDIA H200", "9.0", 143771)]:
        set_config(root, model=model, count=8)
        out = smi("--query-gpu=index,name,compute_cap,memory.total", "--format=csv,noheader,nounits").stdout
        rows = [r.split(", ") for r in out.splitlines()]
        assert len(rows) == 8 and rows[7] == ["7", name, cap, str(total)]
        assert len(smi("-L").stdout.splitlines()) == 8
        table = smi().stdout.splitlines()
        assert all(len(ln) == 91 for ln in table[1:] if ln)
        assert "No running processes found" in smi().stdout


def test_hold_frees_memory_when_process_dies(root):
    import fakegpu
    set_config(root, model="sm120", count=2)
    p = holder(root, "0-1", 20000)
    q = "--query-gpu=index,memory.used,utilization.gpu"
    assert smi(q, "--format=csv,noheader,nounits").stdout == "0, 20009, 0\n1, 20009, 0\n"
    apps = smi("--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader").stdout
    assert apps == f"{p.pid}, python3, 20000 MiB\n{p.pid}, python3, 20000 MiB\n"
    p.kill()
    p.wait()
    assert smi(q, "--format=csv,noheader,nounits").stdout == "0, 0, 0\n1, 0, 0\n"
    assert os.listdir(fakegpu.procs_dir()) == []          # garbage-collected


def test_hold_api_busy_and_release(root):
    import fakegpu
    set_config(root, model="sm90", count=2)
    h = fakegpu.hold({1: 1000}, name="sglang::scheduler")
    st = fakegpu.gpu_state()
    assert st[1]["memory_used_mib"] == 1009 and st[1]["utilization_pct"] == 0 and st[0]["memory_used_mib"] == 0
    h.set_busy(True)
    st = fakegpu.gpu_state()
    assert st[1]["utilization_pct"] == 100 and st[1]["power_draw_w"] >= 0.5 * 700
    h.release()
    assert fakegpu.gpu_state()[1]["memory_used_mib"] == 0
    with pytest.raises(ValueError):
        fakegpu.hold({5: 1})


def test_container_view_lists_no_process(root):
    set_config(root, model="sm120", count=2, host="pve01", vmid=129)
    p = holder(root, "0", 5000)
    try:
        assert smi("--query-compute-apps=pid,used_memory", "--format=csv").stdout == "pid, used_gpu_memory [MiB]\n"
        assert smi("--query-compute-apps=pid", "--format=csv,noheader").stdout == ""
        assert "No running processes found" in smi().stdout
        assert smi("--query-gpu=memory.used", "--format=csv,noheader", "-i", "0").stdout == "5009 MiB\n"
    finally:
        p.kill()
        p.wait()


def test_errors(root):
    set_config(root, count=2)
    cp = smi("--query-gpu=foo", "--format=csv", check=False)
    assert cp.returncode == 2 and cp.stdout.startswith('Field "foo" is not a valid field to query.')
    cp = smi("--bogus", check=False)
    assert cp.returncode == 2 and "Invalid combination of input arguments" in cp.stdout
    cp = smi("-L", "-i", "9", check=False)
    assert cp.returncode == 6 and cp.stdout == "No devices were found\n"
    assert smi("-L", "-i", "1").stdout.startswith("GPU 1: ")


def test_gpu_reset_refuses_busy_gpu(root):
    set_config(root, count=2)
    p = holder(root, "1", 100)
    try:
        assert smi("--gpu-reset", "-i", "0").stdout.endswith("was successfully reset.\n")
        assert smi("--gpu-reset", "-i", "1", check=False).returncode != 0
    finally:
        p.kill()
        p.wait()


def test_ignore_sigterm_needs_sigkill(root):
    set_config(root, count=1, model="sm90")
    p = holder(root, "0", 100, "--ignore-sigterm")
    p.terminate()
    time.sleep(0.3)
    assert p.poll() is None
    p.kill()
    p.wait()


def test_cuda_visible_devices_as_the_driver_reads_it(root, monkeypatch):
    import fakegpu
    set_config(root, model="sm90", count=8)
    cfg = fakegpu.load_config()
    uuids = [g["uuid"] for g in cfg["gpus"]]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert fakegpu.visible_gpus(cfg) == list(range(8))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert fakegpu.visible_gpus(cfg) == [2, 3]
    assert fakegpu.visible_gpus(cfg, "4,5,6,7") == [4, 5, 6, 7]
    assert fakegpu.visible_gpus(cfg, "6,2") == [6, 2]
    assert fakegpu.visible_gpus(cfg, ",".join([uuids[3], uuids[1][:12]])) == [3, 1]
    assert fakegpu.visible_gpus(cfg, "1,9,2") == [1]       # ends at the first GPU that does not exist
    assert fakegpu.visible_gpus(cfg, "1,1,2") == [1]       # and at one named twice
    assert fakegpu.visible_gpus(cfg, "") == []
    assert fakegpu.physical_gpu(0, cfg, "4,5,6,7") == 4
    assert fakegpu.physical_gpu(3, cfg, "4,5,6,7") == 7
    with pytest.raises(IndexError):
        fakegpu.physical_gpu(4, cfg, "4,5,6,7")
