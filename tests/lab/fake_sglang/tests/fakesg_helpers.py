"""Helpers: run the fake SGLang as a subprocess outside the lab (FAKEGPU_ROOT in a temp dir, loopback port).

Every server is started in its own session (process group) and killed by that group id at teardown:
nothing else is ever signalled. A module of its own name (not ``conftest``), so that the tests import it
right when pytest also collects tests/lab/tests (whose conftest.py would shadow this directory's).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request


HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)                                   # tests/lab/fake_sglang
LAB = os.path.dirname(PKG_ROOT)                                    # tests/lab
DEFAULT_TABLE = os.path.join(LAB, "behaviour", "default.yml")
sys.path.insert(0, os.path.join(LAB, "fakes"))
sys.path.insert(0, PKG_ROOT)


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def write_gpu_config(root: str, arch: str = "sm120", count: int = 8) -> None:
    import fakegpu

    os.makedirs(os.path.join(root, "etc", "fakegpu"), exist_ok=True)
    os.makedirs(os.path.join(root, "dev"), exist_ok=True)
    with open(os.path.join(root, "etc", "fakegpu", "config.json"), "w") as f:
        json.dump(fakegpu.make_config(arch, count), f)


class Server:
    def __init__(self, tmp, args, env=None, arch="sm120", table=DEFAULT_TABLE, port=None, gpus=8):
        self.tmp = str(tmp)
        os.makedirs(self.tmp, exist_ok=True)
        self.root = os.path.join(self.tmp, "fakegpu-root")
        write_gpu_config(self.root, arch, gpus)
        self.model = os.path.join(self.tmp, "model")
        os.makedirs(self.model, exist_ok=True)
        with open(os.path.join(self.model, "config.json"), "w") as f:
            json.dump({"architectures": ["Qwen3MoeForCausalLM"], "num_hidden_layers": 48,
                       "model_type": "qwen3_moe"}, f)
        for i in range(4):
            open(os.path.join(self.model, f"model-0000{i + 1}-of-00004.safetensors"), "w").close()
        self.port = port or free_port()
        self.log_path = os.path.join(self.tmp, f"sglang-{self.port}.log")
        e = dict(os.environ)
        e.update({"FAKEGPU_ROOT": self.root, "FAKE_SGLANG_BEHAVIOUR": table, "FAKE_SGLANG_LOAD_SECONDS": "1",
                  "PYTHONPATH": PKG_ROOT + os.pathsep + os.path.join(LAB, "fakes"), "PYTHONUNBUFFERED": "1"})
        e.pop("FAKE_SGLANG_VERSION", None)
        e.update(env or {})
        self.argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", self.model,
                     "--host", "127.0.0.1", "--port", str(self.port)] + list(args)
        self.logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self.logf, stderr=subprocess.STDOUT, env=e,
                                     start_new_session=True, cwd=self.tmp)
        self.pgid = self.proc.pid

    # --- observation ---------------------------------------------------------------------------------
    def log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def wait_log(self, text: str, timeout: float = 20) -> str:
        end = time.time() + timeout
        while time.time() < end:
            lg = self.log()
            if text in lg:
                return lg
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        lg = self.log()
        assert text in lg, f"{text!r} not in log (rc={self.proc.poll()}):\n{lg[-3000:]}"
        return lg

    def wait_ready(self, timeout: float = 20) -> str:
        return self.wait_log("The server is fired up and ready to roll!", timeout)

    def wait_exit(self, timeout: float = 20) -> int:
        return self.proc.wait(timeout=timeout)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def request(self, path, body=None, headers=None, timeout=30, method=None):
        """(status, headers, body bytes)"""
        h = {"Content-Type": "application/json"} if body is not None else {}
        h.update(headers or {})
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        req = urllib.request.Request(self.url(path), data=data, headers=h, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def json(self, path, body=None, **kw):
        st, _hdrs, b = self.request(path, body, **kw)
        return st, (json.loads(b) if b else None)

    def sse(self, path, body, headers=None, timeout=30):
        """list of data payloads (str) of an SSE response"""
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        req = urllib.request.Request(self.url(path), data=json.dumps(body).encode(), headers=h)
        out = []
        with urllib.request.urlopen(req, timeout=timeout) as r:
            assert r.headers["Content-Type"].startswith("text/event-stream")
            for line in r:
                line = line.decode().rstrip("\n")
                if line.startswith("data: "):
                    out.append(line[6:])
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
        else:
            try:                                   # children may outlive a dead leader only briefly (PDEATHSIG)
                os.killpg(self.pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.logf.close()


def write_table(path, rules) -> str:
    import yaml

    with open(path, "w") as f:
        yaml.safe_dump({"rules": rules}, f)
    return str(path)
