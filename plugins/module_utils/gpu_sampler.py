# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU power draw and utilisation, sampled while a benchmark level runs.

A throughput figure alone does not say whether the GPUs were the limit: the seeds' GLM-5 deployment
ran at 100 % utilisation but 55 % of the 600 W power cap (the kernels, not the cards, were the bound).
:class:`Sampler` runs ``nvidia-smi --query-gpu=index,power.draw,power.limit,utilization.gpu
--format=csv,noheader,nounits`` every ``interval`` seconds in a background thread (the command runner is
injected: ``module.run_command`` in the module, a fake in the tests); :func:`summarize` turns the
samples into ``power_w_mean`` (mean draw per GPU, W), ``power_pct_of_limit`` (sum of draws over sum of
limits, %), ``gpu_util_pct_mean`` (%), ``power_w_max`` and ``gpu_samples``.

Stdlib only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading
import time

from ansible_collections.llmserve.sglang.plugins.module_utils import nvidia_smi

SAMPLE_FIELDS = (
    ('index', 'index', 'int'),
    ('power.draw', 'power_draw_w', 'float'),
    ('power.limit', 'power_limit_w', 'float'),
    ('utilization.gpu', 'utilization_pct', 'int'),
)

# the keys summarize() adds to a benchmark level
KEYS = ('power_w_mean', 'power_w_max', 'power_pct_of_limit', 'gpu_util_pct_mean', 'gpu_samples')
LABELS = {
    'power_w_mean': 'Mean GPU power draw (W per GPU)',
    'power_w_max': 'Max GPU power draw (W)',
    'power_pct_of_limit': 'Mean GPU power (% of limit)',
    'gpu_util_pct_mean': 'Mean GPU utilization (%)',
    'gpu_samples': 'GPU samples',
}


def sample_argv(nvidia_smi_path='nvidia-smi'):
    """argv of one sample (no header, no units)."""
    return nvidia_smi.query_gpu_argv(nvidia_smi_path, SAMPLE_FIELDS)


def parse_sample(text, gpus=None):
    """Rows of one sample; only the GPUs in ``gpus`` (indexes) when given. Unparseable output -> []."""
    try:
        rows = nvidia_smi.parse_csv(text, SAMPLE_FIELDS)
    except nvidia_smi.NvidiaSmiParseError:
        return []
    if gpus is not None:
        wanted = set(int(g) for g in gpus)
        rows = [r for r in rows if r.get('index') in wanted]
    return rows


def _mean(values):
    return float(sum(values)) / len(values) if values else None


def summarize(samples):
    """Figures from a list of samples (each a list of rows as :func:`parse_sample` returns).

    Empty samples are ignored; a figure whose readings are all missing (``[N/A]``) is None.
    """
    samples = [s for s in samples or [] if s]
    draws = [r['power_draw_w'] for s in samples for r in s if r.get('power_draw_w') is not None]
    utils = [r['utilization_pct'] for s in samples for r in s if r.get('utilization_pct') is not None]
    pcts = []
    for s in samples:
        pairs = [(r['power_draw_w'], r['power_limit_w']) for r in s
                 if r.get('power_draw_w') is not None and r.get('power_limit_w')]
        if pairs:
            pcts.append(100.0 * sum(p[0] for p in pairs) / sum(p[1] for p in pairs))
    out = {
        'power_w_mean': _mean(draws),
        'power_w_max': max(draws) if draws else None,
        'power_pct_of_limit': _mean(pcts),
        'gpu_util_pct_mean': _mean(utils),
        'gpu_samples': len(samples),
    }
    for key in ('power_w_mean', 'power_w_max', 'power_pct_of_limit', 'gpu_util_pct_mean'):
        if out[key] is not None:
            out[key] = round(out[key], 1)
    return out


class Sampler(object):
    """Samples in a daemon thread between :meth:`start` and :meth:`stop`.

    ``run(argv) -> (rc, stdout, stderr)``. A failing or slow command does not stop the benchmark: failures
    are counted (``errors``, first message in ``error``) and the next sample is taken ``interval`` after the
    previous one began (never two at once).
    """

    def __init__(self, run, argv=None, interval=0.5, gpus=None, clock=time.monotonic):
        self.run = run
        self.argv = list(argv or sample_argv())
        self.interval = max(0.05, float(interval))
        self.gpus = gpus
        self.clock = clock
        self.samples = []
        self.errors = 0
        self.error = None
        self._stop = threading.Event()
        self._thread = None

    def sample_once(self):
        try:
            rc, out, err = self.run(self.argv)
        except Exception as e:  # a runner that raises (e.g. binary gone) counts as a failed sample
            rc, out, err = -1, '', str(e)
        rows = parse_sample(out, self.gpus) if rc == 0 else []
        if rows:
            self.samples.append(rows)
        else:
            self.errors += 1
            if self.error is None:
                self.error = ('%s exited %s: %s' % (self.argv[0], rc, (err or out or '').strip()[:200])
                              if rc != 0 else 'no GPU rows in: %r' % (out or '')[:200])
        return rows

    def _loop(self):
        while not self._stop.is_set():
            began = self.clock()
            self.sample_once()
            self._stop.wait(max(0.0, self.interval - (self.clock() - began)))

    def start(self):
        self.samples = []
        self.errors = 0
        self.error = None
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name='gpu-sampler')
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self):
        """Stop sampling (waits for a sample in flight, bounded) and return :meth:`summary`."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(max(5.0, 4 * self.interval))
            self._thread = None
        return self.summary()

    def summary(self):
        out = summarize(self.samples)
        out['gpu_sample_errors'] = self.errors
        if self.error and not self.samples:
            out['gpu_sample_error'] = self.error
        return out
