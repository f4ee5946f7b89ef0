#!/usr/bin/env python
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Install the real SGLang 0.5.23 for the lab's GPU hosts, outside the hosts' roots (reused when it is there).

    install.py [--root /var/lib/llmserve-lab] [--check]

Under ROOT (the hosts see it through their overlay's lower layer, read-only in effect):

* ``sglang-0.5.23/``: a venv with ``pip install sglang==0.5.23`` from PyPI (about 11 GB, 4 minutes the
  first time; kept, and reused when it imports), plus the lab's GPU plugin (``plugin/``: copied on every
  run, so the venv always has this checkout's version);
* ``stub/libcuda.so.1``: the stand-in for the NVIDIA driver library (``cuda_stub.c``: every call answers
  CUDA_ERROR_NO_DEVICE); SGLang's kernel package is linked against libcuda.so.1 and would not load
  without one. The GPU is the missing hardware, so this is the one piece not from PyPI;
* ``models/tiny-qwen2-chat/``: a tiny model trained on CPU to answer the smoke prompts (``make_model.py``),
  remade when that script changes.

``--check`` changes nothing: exit 0 when all three are there and the venv imports, 1 otherwise.
"""
import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION = "0.5.23"
SPEC = "sglang==%s" % VERSION
MODEL = "tiny-qwen2-chat"


def log(msg):
    print("real-sglang: %s" % msg, flush=True)


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def venv_ok(venv):
    py = os.path.join(venv, "bin", "python")
    if not os.access(py, os.X_OK) or not os.path.exists(os.path.join(venv, ".llmserve-installed")):
        return False
    code = ("import importlib.metadata as m, sys; v = m.version('sglang'); import torch, sglang; "
            "sys.exit(0 if v == %r else 3)" % VERSION)
    return subprocess.run([py, "-c", code], capture_output=True, check=False).returncode == 0


def install_venv(venv, python):
    if os.path.exists(venv):
        log("%s is there but does not import %s: making it anew" % (venv, SPEC))
        shutil.rmtree(venv)
    t0 = time.monotonic()
    subprocess.run([python, "-m", "venv", venv], check=True)
    log("pip install %s into %s (about 11 GB, minutes)" % (SPEC, venv))
    subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", SPEC], check=True)
    with open(os.path.join(venv, ".llmserve-installed"), "w", encoding="utf-8") as f:
        f.write("%s\n" % SPEC)
    log("installed in %.0f s" % (time.monotonic() - t0))


def site_packages(venv):
    py = os.path.join(venv, "bin", "python")
    return subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def install_plugin(venv):
    """Copy the plugin's files that differ (a running lab host sees the venv through an overlay's lower layer,
    which must not change under it: nothing is removed, and an unchanged file is not touched)."""
    sp = site_packages(venv)
    src = os.path.join(HERE, "plugin")
    copied = []
    for top, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            s = os.path.join(top, name)
            d = os.path.join(sp, os.path.relpath(s, src))
            if os.path.exists(d) and digest(d) == digest(s):
                continue
            os.makedirs(os.path.dirname(d), exist_ok=True)
            shutil.copy(s, d + ".tmp")
            os.replace(d + ".tmp", d)
            copied.append(os.path.relpath(s, src))
    if copied:
        log("lab GPU plugin: %s -> %s" % (", ".join(sorted(copied)), sp))


def build_stub(root):
    out = os.path.join(root, "stub", "libcuda.so.1")
    src = os.path.join(HERE, "cuda_stub.c")
    stamp = out + ".src"
    if os.path.exists(out) and os.path.exists(stamp) and open(stamp, encoding="utf-8").read() == digest(src):
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", out + ".tmp", src], check=True)
    os.replace(out + ".tmp", out)
    with open(stamp, "w", encoding="utf-8") as f:
        f.write(digest(src))
    log("built %s" % out)
    return out


def model_ok(mdir, script):
    stamp = os.path.join(mdir, ".made-by")
    return os.path.exists(os.path.join(mdir, "model.safetensors")) and os.path.exists(stamp) \
        and open(stamp, encoding="utf-8").read() == digest(script)


def make_model(root, venv):
    mdir = os.path.join(root, "models", MODEL)
    script = os.path.join(HERE, "make_model.py")
    if model_ok(mdir, script):
        return mdir
    tmp = mdir + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.monotonic()
    subprocess.run([os.path.join(venv, "bin", "python"), script, tmp], check=True)
    with open(os.path.join(tmp, ".made-by"), "w", encoding="utf-8") as f:
        f.write(digest(script))
    shutil.rmtree(mdir, ignore_errors=True)
    os.replace(tmp, mdir)
    log("made %s in %.0f s" % (mdir, time.monotonic() - t0))
    return mdir


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--root", default=os.environ.get("LLMSERVE_LAB_REAL_ROOT", "/var/lib/llmserve-lab"))
    ap.add_argument("--python", default=shutil.which("python3.11") or sys.executable)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    venv = os.path.join(a.root, "sglang-%s" % VERSION)
    if a.check:
        ok = venv_ok(venv) and os.path.exists(os.path.join(a.root, "stub", "libcuda.so.1")) \
            and model_ok(os.path.join(a.root, "models", MODEL), os.path.join(HERE, "make_model.py"))
        log("ready" if ok else "not installed (run: make setup-real-sglang)")
        return 0 if ok else 1
    os.makedirs(a.root, exist_ok=True)
    with open(os.path.join(a.root, "install.lock"), "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if venv_ok(venv):
            log("%s in %s: reused" % (SPEC, venv))
        else:
            install_venv(venv, a.python)
        install_plugin(venv)
        build_stub(a.root)
        mdir = make_model(a.root, venv)
    log("ready: python %s/bin/python, model %s" % (venv, mdir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
