# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import threading

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_sampler

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, 'cases', 'gpu_sampler.yml')) as _f:
    CASES = yaml.safe_load(_f)


@pytest.mark.parametrize('case', CASES['summarize'], ids=[c['name'] for c in CASES['summarize']])
def test_summarize(case):
    samples = [gpu_sampler.parse_sample(text, case.get('gpus')) for text in case['samples']]
    got = gpu_sampler.summarize(samples)
    for key, value in case['want'].items():
        assert got[key] == value, key


def test_sample_argv_is_the_documented_query():
    assert gpu_sampler.sample_argv('/usr/bin/nvidia-smi') == [
        '/usr/bin/nvidia-smi', '--query-gpu=index,power.draw,power.limit,utilization.gpu', '--format=csv,noheader,nounits']


class Runner(object):
    """Answers from a list (the last answer repeats); signals after ``signal_after`` calls."""

    def __init__(self, answers, signal_after=3):
        self.answers = list(answers)
        self.calls = []
        self.enough = threading.Event()
        self.signal_after = signal_after

    def __call__(self, argv):
        self.calls.append(list(argv))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if len(self.calls) >= self.signal_after:
            self.enough.set()
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_sampler_thread_collects_until_stopped():
    run = Runner([(0, '0, 330.0, 600.0, 100\n', '')])
    sampler = gpu_sampler.Sampler(run, ['nvidia-smi', 'q'], interval=0.05).start()
    assert run.enough.wait(5)
    got = sampler.stop()
    n = len(run.calls)
    assert got['gpu_samples'] == n >= 3
    assert got['power_pct_of_limit'] == 55.0 and got['gpu_util_pct_mean'] == 100.0
    assert got['gpu_sample_errors'] == 0 and 'gpu_sample_error' not in got
    assert all(c == ['nvidia-smi', 'q'] for c in run.calls)
    # stopped means stopped
    assert not run.enough.wait(0.2) or len(run.calls) == n


def test_sampler_failures_are_counted_not_raised():
    run = Runner([(9, '', 'NVIDIA-SMI has failed'), OSError('gone'), (0, '0, 60.0, 600.0, 10\n', '')])
    sampler = gpu_sampler.Sampler(run, interval=0.05)
    for dummy in range(3):
        sampler.sample_once()
    got = sampler.summary()
    assert got['gpu_samples'] == 1 and got['gpu_sample_errors'] == 2
    assert got['power_pct_of_limit'] == 10.0
    assert 'gpu_sample_error' not in got   # some samples did come


def test_sampler_reports_why_when_nothing_came():
    run = Runner([(9, '', 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver')])
    sampler = gpu_sampler.Sampler(run, interval=0.05)
    sampler.sample_once()
    got = sampler.summary()
    assert got['gpu_samples'] == 0 and got['power_w_mean'] is None
    assert 'could not communicate' in got['gpu_sample_error']


def test_start_resets_previous_level():
    run = Runner([(0, '0, 600.0, 600.0, 100\n', '')], signal_after=1)
    sampler = gpu_sampler.Sampler(run, interval=0.05)
    sampler.sample_once()
    sampler.start()
    assert run.enough.wait(5)
    got = sampler.stop()
    assert got['gpu_samples'] == len(run.calls) - 1
