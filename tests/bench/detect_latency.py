"""Measure how fast await_server_ready's wait loop notices a failure (no Ansible start-up counted).

A child process plays the server: it writes start-up lines to a log file, then, when the
bench sends it SIGUSR1, it writes a scheduler traceback and SIGKILLs itself (SGLang's own
crash path); or the bench SIGKILLs it with nothing in the log (OOM killer); or, on SIGUSR2,
it writes a fatal line and stays alive; or (rank_killed) the bench SIGKILLs its child, a process
named like SGLang's scheduler (comm ``sglang::schedul``), which it never reaps, and it logs nothing.
The wait loop (``wait()`` of module_utils/_readiness.py) runs in this process, on the log file + the
PID and the PID's ranks, with the module's defaults (poll_interval 0.1 s).
Latency = return time - event time.

  PYTHONPATH=/tmp/ac python3 tests/bench/detect_latency.py --runs 10
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from ansible_collections.llmserve.sglang.plugins.module_utils import _readiness
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_log
from ansible_collections.llmserve.sglang.plugins.module_utils.logsource import FileLog

CHILD = r'''
import ctypes, os, signal, sys, time
if len(sys.argv) > 2:
    rank = os.fork()
    if rank == 0:
        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(b'sglang::schedul'), 0, 0, 0)   # PR_SET_NAME
        ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)      # PR_SET_PDEATHSIG: SIGKILL when the server ends
        while True:
            time.sleep(1)
    with open(sys.argv[2], 'w') as f:
        f.write(str(rank))
log = open(sys.argv[1], 'a', buffering=1)
def crash(*_):
    log.write("[2026-05-01 12:01:00 TP3] Scheduler hit an exception: Traceback (most recent call last):\n"
              '  File "/x/flashinfer/fused_moe/core.py", line 6518, in trtllm_fp4_block_scale_moe\n'
              "    return get_trtllm_moe_sm100_module().trtllm_fp4_block_scale_moe(\n"
              "RuntimeError: Error in function 'TrtllmGenBatchedGemmRunner' at "
              "/x/flashinfer/data/csrc/trtllm_batched_gemm_runner.cu:218: The trtllm-gen batched GEMM cubin manifest "
              "contains no kernels runnable on sm120; this backend currently ships cubins for sm100, sm103 and sm107.\n")
    time.sleep(0.05)
    log.write("[2026-05-01 12:01:00] Received sigquit from a child process. It usually means the child failed.\n")
    os.kill(os.getpid(), signal.SIGKILL)
def fatal_alive(*_):
    log.write("[2026-05-01 12:06:00 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)\n")
signal.signal(signal.SIGUSR1, crash)
signal.signal(signal.SIGUSR2, fatal_alive)
log.write("[2026-05-01 12:00:00 TP0] Load weight begin\n")
i = 0
while True:
    i += 1
    log.write("Loading safetensors checkpoint shards: %d%% Completed | %d/100 [00:01<00:01]\n" % (i % 100, i % 100))
    time.sleep(0.5)
'''


def one(kind, tmp, start_wait=0.5, pre_event=1.0):
    path = os.path.join(tmp, 'log-%s-%f' % (kind, time.time()))
    open(path, 'w').close()
    rank_file = path + '.rank'
    child = subprocess.Popen([sys.executable, '-c', CHILD, path] + ([rank_file] if kind == 'rank_killed' else []))
    time.sleep(start_wait)
    p = {'poll_interval': 0.1, 'start_time': time.time(), 'timeout': 60, 'hang_timeout': 60, 'unhealthy_timeout': 60,
         'require_ready_line': True, 'step': 0}
    p.update(_readiness.TIMING)   # the module's own read windows
    out = {}

    def run():
        watch = _readiness.PidWatch(child.pid)
        out['res'] = _readiness.wait(p, watch, FileLog(path), None, st, tree=_readiness.make_tree(p, watch))
        out['t'] = time.time()
    st = sglang_log.LogState()
    th = threading.Thread(target=run)
    th.start()
    time.sleep(pre_event)
    t_event = time.time()
    if kind == 'crash':
        os.kill(child.pid, signal.SIGUSR1)
    elif kind == 'killed':
        os.kill(child.pid, signal.SIGKILL)
    elif kind == 'rank_killed':
        with open(rank_file) as f:
            os.kill(int(f.read()), signal.SIGKILL)    # the child's own child, by the PID it wrote
    else:
        os.kill(child.pid, signal.SIGUSR2)
    th.join(10)
    if child.poll() is None:
        child.kill()          # our own child, by its handle
    child.wait()
    return out['res']['status'], out['t'] - t_event, st.evidence()[:1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--runs', type=int, default=10)
    ap.add_argument('--start-wait', type=float, default=0.5, help='seconds between starting the child and the wait')
    ap.add_argument('--pre-event', type=float, default=1.0, help='seconds the wait runs before the event')
    ap.add_argument('--json', action='store_true', help='one JSON object per failure class')
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    for kind in ('crash', 'killed', 'fatal_alive', 'rank_killed'):
        lats = []
        statuses = set()
        for dummy in range(args.runs):
            status, lat, ev = one(kind, tmp, args.start_wait, args.pre_event)
            lats.append(lat)
            statuses.add(status)
        lats.sort()
        if args.json:
            print(json.dumps({'kind': kind, 'statuses': sorted(statuses), 'n': len(lats), 'min': lats[0],
                              'median': lats[len(lats) // 2] if len(lats) % 2 else
                              (lats[len(lats) // 2 - 1] + lats[len(lats) // 2]) / 2, 'max': lats[-1]}))
            continue
        print('%-12s status=%-8s n=%d  latency min %.3f s  median %.3f s  max %.3f s  evidence=%s' % (
            kind, ','.join(sorted(statuses)), len(lats), lats[0], lats[len(lats) // 2], lats[-1], ev))


if __name__ == '__main__':
    main()
