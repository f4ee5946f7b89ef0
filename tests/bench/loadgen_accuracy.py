"""Measure plugins/module_utils/loadgen.py against a server streaming at a known rate.

Starts tests/bench/sse_server.py in its own process on loopback, runs one load level
with loadgen.run_level, then compares the generator's figures with the truth recorded by
the server (when each event actually left it).  Prints both and the relative error.

  python3 tests/bench/loadgen_accuracy.py --concurrency 64 --num-prompts 128 \
      --output-len 256 --itl 0.0256 --ttft 0.1      # 64 streams x 39 tok/s = 2,500 tok/s
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, 'plugins', 'module_utils'))
import loadgen  # noqa: E402  (stdlib-only file, imported directly)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, default=18123)
    ap.add_argument('--concurrency', type=int, default=64)
    ap.add_argument('--num-prompts', type=int, default=128)
    ap.add_argument('--input-len', type=int, default=256)
    ap.add_argument('--output-len', type=int, default=256)
    ap.add_argument('--ttft', type=float, default=0.1)
    ap.add_argument('--itl', type=float, default=0.0256)
    args = ap.parse_args()
    fd, rec = tempfile.mkstemp(suffix='.json')
    os.close(fd)
    srv = subprocess.Popen([sys.executable, os.path.join(HERE, 'sse_server.py'), '--port', str(args.port),
                            '--ttft', str(args.ttft), '--itl', str(args.itl), '--record', rec],
                           stdout=subprocess.PIPE)
    try:
        srv.stdout.readline()
        cpu0 = os.times()
        fig, results = loadgen.run_level('127.0.0.1', args.port, args.concurrency, args.num_prompts,
                                         input_len=args.input_len, output_len=args.output_len, warmup=1,
                                         vocab_size=32000)  # the SSE server reads no ids; a Llama-sized vocabulary
        cpu1 = os.times()
        stats = json.loads(urllib.request.urlopen('http://127.0.0.1:%d/stats' % args.port).read())
    finally:
        srv.terminate()   # our own child, by its handle
        srv.wait()
    stats = [s for s in stats if len(s['sends']) == args.output_len]
    stats.sort(key=lambda s: s['recv'])
    timed = stats[-args.num_prompts:]          # drop the warm-up request
    t_first = min(s['recv'] for s in timed)
    t_last = max(s['sends'][-1] for s in timed)
    gaps = [b - a for s in timed for a, b in zip(s['sends'], s['sends'][1:])]
    ttfts = [s['sends'][0] - s['recv'] for s in timed]
    tokens = sum(len(s['sends']) for s in timed)
    truth = {
        'output_throughput': tokens / (t_last - t_first),
        'mean_itl_ms': 1000 * sum(gaps) / len(gaps),
        'median_itl_ms': 1000 * loadgen.percentile(gaps, 50),
        'mean_ttft_ms': 1000 * sum(ttfts) / len(ttfts),
        'mean_e2e_latency_ms': 1000 * sum(s['sends'][-1] - s['recv'] for s in timed) / len(timed),
    }
    print(loadgen.format_table(fig))
    print('errors:', fig['errors'])
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    print('\nload generator CPU: %.2f s over %.2f s wall (%.1f%% of one core), %d cores' % (
        cpu, fig['duration_s'], 100 * cpu / fig['duration_s'], os.cpu_count()))
    print('nominal: %.0f tok/s total (%d streams x %.1f tok/s)' % (args.concurrency / args.itl, args.concurrency, 1 / args.itl))
    print('%-22s %12s %12s %8s' % ('figure', 'measured', 'truth', 'error'))
    worst = 0
    for k, v in truth.items():
        err = abs(fig[k] - v) / v * 100
        if k != 'mean_ttft_ms':
            worst = max(worst, err)
        print('%-22s %12.3f %12.3f %7.2f%%' % (k, fig[k], v, err))
    print('worst error (throughput/ITL/E2E): %.2f%%' % worst)
    print('TTFT absolute difference: %.2f ms (includes connect/request send, which the server cannot see)' % (
        fig['mean_ttft_ms'] - truth['mean_ttft_ms']))


if __name__ == '__main__':
    main()
