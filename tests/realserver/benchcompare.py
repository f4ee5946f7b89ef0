# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's load test beside SGLang 0.5.23's own bench_serving on one serving real server.

Used by the real-server gate (tests/realserver/test_real_server.py) and `make bench` (P5 on the real server). Both
send random token ids of the model's own vocabulary as ids (bench_serving's ``random-ids`` with ``--tokenize-prompt``:
without it bench_serving sends the text decoded from the ids, which the server tokenizes again into another
length), the same input and output lengths (``--random-range-ratio 1``: exact), ``ignore_eos`` and the same
concurrency. The collection's load test
runs without its GPU sampler here, as bench_serving has none: on the lab the sampler's nvidia-smi is a Python
program started every 0.5 s on the CPUs the real server computes on, which took a third of the server's throughput.
"""

from __future__ import absolute_import, division, print_function

import json

BENCH = {"concurrency": [4], "num_prompts": 16, "input_len": 64, "output_len": 32, "gpu_sampling": False}
# `make bench` (P5): eight times the requests, so that each run lasts seconds rather than a fraction of one
BENCH_P5 = dict(BENCH, num_prompts=128)
REAL_PYTHON = "/var/lib/llmserve-lab/sglang-0.5.23/bin/python3"
MODEL = "/var/lib/llmserve-lab/models/tiny-qwen2-chat"
# the figures compared, and how far apart they may be (relative to bench_serving's)
COMPARED = ("output_throughput", "median_ttft_ms")
TOLERANCE = 0.05


def bench_serving_command(bench=None, port=30000):
    """The shell command, run on the GPU host, that runs bench_serving and prints its JSON line last."""
    bench = bench or BENCH
    # HF_HUB_OFFLINE: bench_serving looks the served model's name up on the Hugging Face hub first (five retries,
    # twice: about 45 s with no network); the tokenizer it uses is the local folder given
    return " ".join([
        "HF_HUB_OFFLINE=1", REAL_PYTHON, "-m", "sglang.bench_serving", "--backend", "sglang", "--host", "127.0.0.1", "--port", str(port),
        "--dataset-name", "random-ids", "--tokenize-prompt", "--tokenizer", MODEL, "--num-prompts", str(bench["num_prompts"]),
        "--random-input-len", str(bench["input_len"]), "--random-output-len", str(bench["output_len"]),
        "--random-range-ratio", "1", "--max-concurrency", str(bench["concurrency"][0]), "--disable-tqdm",
        "--output-file", "/tmp/bench-serving.jsonl", ">/tmp/bench-serving.log", "2>&1;",
        "tail", "-n", "1", "/tmp/bench-serving.jsonl"])


def bench_serving_result(output):
    """bench_serving's JSON line (the last line of ``output``) -> dict, or None."""
    try:
        data = json.loads(output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return data if isinstance(data, dict) else None


def collection_result(json_output, host, bench=None):
    """From ansible-playbook's JSON callback output of playbooks/benchmark.yml: (the module's result, the level)."""
    bench = bench or BENCH
    doc, dummy = json.JSONDecoder().raw_decode(json_output[json_output.index("{"):])
    for play in doc["plays"]:
        for task in play["tasks"]:
            res = task["hosts"].get(host) or {}
            levels = (res.get("benchmark") or {}).get("concurrency") or {}
            if levels:
                return res, levels.get(str(bench["concurrency"][0])) or {}
    return None, {}


def medians(runs):
    """{figure: its median over ``runs``} for the figures compared (a figure a run lacks is left out of its median;
    None when no run has it)."""
    out = {}
    for key in COMPARED:
        values = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
        out[key] = _median(values) if values else None
    return out


def spread(runs):
    """{figure: (max - min) / median over ``runs``}: how far one tool's runs on the same server differ from each
    other (None with fewer than two runs that have the figure). Two tools whose medians are closer than this are
    not told apart by these rounds."""
    out = {}
    mid = medians(runs)
    for key in COMPARED:
        values = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
        out[key] = ((max(values) - min(values)) / mid[key]) if len(values) > 1 and mid[key] else None
    return out


def _median(values):
    values = sorted(values)
    return (values[(len(values) - 1) // 2] + values[len(values) // 2]) / 2.0


def paired(ours, theirs):
    """{figure: (median, low, high, n)} of the per-round differences (ours - theirs) / theirs, over the rounds in
    which both tools have the figure (``ours[i]`` and ``theirs[i]`` ran one right after the other on the same
    server); low and high are the medians of the lower and the upper half, so half the rounds lie between them.
    The two runs of a round share the machine's speed of that minute, so the machine's drift from minute to minute,
    which makes each tool's own spread over the rounds large, cancels out of each difference. None where no round
    has both."""
    out = {}
    for key in COMPARED:
        rels = sorted((a[key] - b[key]) / b[key] for a, b in zip(ours, theirs)
                      if isinstance(a.get(key), (int, float)) and isinstance(b.get(key), (int, float)) and b[key])
        if not rels:
            out[key] = None
            continue
        half = (len(rels) + 1) // 2
        out[key] = (_median(rels), _median(rels[:half]), _median(rels[len(rels) - half:]), len(rels))
    return out


def compare(ours, theirs):
    """{figure: (ours, theirs, (ours - theirs) / theirs)} for the figures compared."""
    out = {}
    for key in COMPARED:
        a, b = ours.get(key), theirs.get(key)
        out[key] = (a, b, ((a - b) / b) if a is not None and b else None)
    return out


def row(ours, theirs):
    """One line for a report: both figures and how far apart they are."""
    parts = []
    for key, (a, b, rel) in sorted(compare(ours, theirs).items()):
        parts.append("%s %s vs %s (%s)" % (key, "%.1f" % a if a is not None else "-", "%.1f" % b if b is not None
                                           else "-", "%+.1f %%" % (100 * rel) if rel is not None else "-"))
    return "; ".join(parts)
