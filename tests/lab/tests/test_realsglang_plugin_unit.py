"""Unit tests of the lab's GPU plugin for the real SGLang (tests/lab/realsglang/plugin), without the lab (no root).

The arch answers are plain functions; the argument check runs against the installed real SGLang 0.5.23 when
``make setup-real-sglang`` has put it under /var/lib/llmserve-lab (skipped otherwise; about a minute on 2 cores).
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import CHECKOUT, FAKES

PLUGIN = os.path.join(CHECKOUT, "tests", "lab", "realsglang", "plugin")
sys.path.insert(0, PLUGIN)
import llmlab_gpu  # noqa: E402  pylint: disable=wrong-import-position

REAL = "/var/lib/llmserve-lab"
REAL_PYTHON = os.path.join(REAL, "sglang-0.5.23", "bin", "python3")
REAL_MODEL = os.path.join(REAL, "models", "tiny-qwen2-chat")
# the collection's argv for the lab's tiny model (tests/realserver/vars.yml, roles/preflight/defaults)
BASE = ("--model-path %s --served-model-name tiny --tp-size 1 --quantization modelopt_fp4 --host 127.0.0.1 "
        "--port 31000 --disable-custom-all-reduce" % REAL_MODEL)
KNOWN_GOOD = "--moe-runner-backend flashinfer_cutlass --fp4-gemm-backend flashinfer_cudnn"


@pytest.mark.parametrize("arch,cap", [("sm120", (12, 0)), ("sm100", (10, 0)), ("sm90", (9, 0)), ("sm89", (8, 9)),
                                      ("SM_121", (12, 1)), ("sm103", (10, 3))])
def test_capability_of_an_arch(arch, cap):
    assert llmlab_gpu.capability(arch) == cap


@pytest.mark.parametrize("arch", [None, "", "12.0", "hopper", "sm", "sm1"])
def test_no_capability_no_probes(arch):
    assert llmlab_gpu.capability(arch) is None
    assert llmlab_gpu.arch_probes(arch) is None


def test_probes_answer_for_the_arch():
    sm120, sm100, sm90 = (llmlab_gpu.arch_probes(a) for a in ("sm120", "sm100", "sm90"))
    assert sm120["get_device_capability"] == (12, 0) and sm120["get_device_sm"] == 120
    assert (sm120["is_sm120_supported"], sm120["is_sm100_supported"], sm120["is_blackwell_supported"]) == \
        (True, False, True)
    assert (sm100["is_sm100_supported"], sm100["is_sm120_supported"], sm100["is_sm100_or_sm110_supported"]) == \
        (True, False, True)
    assert (sm90["is_sm90_supported"], sm90["is_hopper_with_cuda_12_3"], sm90["is_blackwell"]) == (True, True, False)
    for probes in (sm120, sm100, sm90):
        # a CUDA host, not the CPU the lab runs on
        assert probes["is_cuda"] and not probes["is_cpu"] and not probes["cpu_has_amx_support"]


def test_the_tables_error_keeps_its_class():
    val = llmlab_gpu._gpu_error({"error": "ValueError: Current platform does not support NVFP4 quantization"})
    assert (type(val).__name__, str(val)) == ("ValueError", "Current platform does not support NVFP4 quantization")
    run = llmlab_gpu._gpu_error({"error": "RuntimeError: Error in function 'X' at {site}/a.cu:1: boom"})
    assert type(run).__name__ == "RuntimeError" and str(run).startswith("Error in function 'X' at /")
    assert "{site}" not in str(run)
    other = llmlab_gpu._gpu_error({"error": "KeyError: 3"})
    assert (type(other).__name__, str(other)) == ("RuntimeError", "KeyError: 3")
    cuda = "torch.AcceleratorError: CUDA error: an illegal instruction was encountered\nSearch for `cudaError'"
    if os.path.exists(REAL_PYTHON):     # torch.AcceleratorError comes from the real server's torch
        # this checkout's plugin, by file (the real server's site-packages holds an installed copy)
        code = ("import importlib.util, json, sys; "
                "spec = importlib.util.spec_from_file_location('plugin_here', sys.argv[1]); "
                "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); "
                "e = mod._gpu_error({'error': sys.argv[2]}); "
                "print(json.dumps([type(e).__module__, type(e).__name__, str(e)]))")
        out = subprocess.run([REAL_PYTHON, "-c", code, os.path.join(PLUGIN, "llmlab_gpu", "__init__.py"), cuda],
                             capture_output=True, text=True, check=True).stdout
        assert json.loads(out) == ["torch", "AcceleratorError", cuda.split(": ", 1)[1]]


DRIVER = r"""
import json, shlex, sys
import llmlab_gpu
from sglang.srt.server_args import ServerArgs, prepare_server_args
from sglang.srt.utils import common
missing = [name for name in llmlab_gpu.arch_probes("sm120") if not hasattr(common, name)]
codes = []
for i, (arch, argv) in enumerate(json.loads(sys.argv[1])):
    sys.stderr.write("=== case %d\n" % i)
    sys.stderr.flush()
    try:
        llmlab_gpu._check_as_given(prepare_server_args(shlex.split(argv)), ServerArgs.resolve_once, arch)
        codes.append(0)
    except SystemExit as exc:
        codes.append(exc.code)
print(json.dumps({"missing": missing, "codes": codes}))
"""

# (arch, the candidate's flags, SGLang 0.5.23's message or None when it accepts them)
CASES = [
    ("sm120", KNOWN_GOOD, None),
    ("sm120", "--moe-runner-backend flashinfer_trtllm", None),
    ("sm120", "--attention-backend cutedsl_mla",
     "ValueError: CuteDSL MLA backend is only supported on Blackwell GPUs (SM100). Please use a different backend."),
    ("sm100", "--attention-backend cutedsl_mla", None),
    ("sm120", "--moe-runner-backend megamoe",
     "ValueError: --moe-a2a-backend megamoe needs a CUDA SM90 GPU (block-FP8 experts) or an SM100-class GPU"),
    ("sm90", "--moe-runner-backend megamoe", None),
    ("sm120", "--attention-backend trtllm_mha --speculative-algorithm NGRAM",
     "ValueError: speculative_eagle_topk(10) > 1 with page_size(64) > 1 is unstable"),
]


@pytest.mark.skipif(not (os.access(REAL_PYTHON, os.X_OK) and os.path.isdir(REAL_MODEL)),
                    reason="the real SGLang 0.5.23 is not installed (make setup-real-sglang)")
def test_sglang_checks_the_given_arguments_on_the_fake_arch(tmp_path):
    """SGLang's own checks, in a fork of the process, on the arch given: the rejected combination exits 1 after
    SGLang's own message, the same combination on the arch that has the kernels passes, and so does the known-good."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = os.path.join(FAKES, "nvidia_smi.py")
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nexec %s %s \"$@\"\n" % (sys.executable, smi))
    (bin_dir / "nvidia-smi").chmod(0o755)
    (tmp_path / "etc/fakegpu").mkdir(parents=True)
    sys.path.insert(0, FAKES)
    import fakegpu  # pylint: disable=import-outside-toplevel
    (tmp_path / "etc/fakegpu/config.json").write_text(json.dumps(fakegpu.make_config("sm120", count=1)))
    env = dict(os.environ, PYTHONPATH=PLUGIN, FAKEGPU_ROOT=str(tmp_path), SGLANG_USE_CPU_ENGINE="1",
               SGLANG_NCCL_SO_PATH="/nonexistent/libnccl.so.2", LD_LIBRARY_PATH=os.path.join(REAL, "stub"),
               PATH="%s:%s" % (bin_dir, os.environ.get("PATH", "")), PYTHONDONTWRITEBYTECODE="1")
    cases = [(arch, BASE + " " + flags) for arch, flags, _message in CASES]
    cp = subprocess.run([REAL_PYTHON, "-c", DRIVER, json.dumps(cases)], capture_output=True, text=True, env=env,
                        timeout=900, check=False)
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-4000:]
    out = json.loads(cp.stdout.strip().splitlines()[-1])
    assert out["missing"] == [], "probes the installed SGLang does not have: %s" % out["missing"]
    said = cp.stderr.split("=== case ")[1:]
    for (arch, flags, message), code, text in zip(CASES, out["codes"], said):
        if message is None:
            assert code == 0, (arch, flags, text[-3000:])
            assert "Traceback" not in text, (arch, flags, text[-3000:])
        else:
            assert code == 1, (arch, flags, text[-3000:])
            last = [line for line in text.splitlines() if line.startswith("ValueError")]
            assert last and last[-1].startswith(message), (arch, flags, text[-3000:])
