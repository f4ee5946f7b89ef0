# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters the backend_trial and report roles use; the logic lives in module_utils/trial.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import _systemd
from ansible_collections.llmserve.sglang.plugins.module_utils import smoke
from ansible_collections.llmserve.sglang.plugins.module_utils import trial


def trial_init(plan):
    return trial.init_results(plan)


def trial_outcome(await_result, smoke_result=None, seconds=0.0):
    if not isinstance(smoke_result, dict) or smoke_result.get('skipped'):
        smoke_result = None
    return trial.outcome(await_result, smoke_result, seconds)


def trial_select(by_name, selection='first_ready', metric='output_throughput'):
    return trial.select(by_name, selection, metric)


def trial_verified(outcome, install, check_mode=False):
    return trial.verified_by_trial(outcome, install, check_mode)


def trial_check_mode(by_name, planned):
    return trial.check_mode_results(by_name, planned)


def fallback_used(results, selected, final_state):
    return trial.fallback_used(results, selected, final_state)


def trial_lost_server(smoke_result):
    return trial.lost_server(smoke_result)


def trial_after_smoke(await_result, postmortem=None):
    return trial.after_smoke(await_result, postmortem)


def benchmark_verdict(result):
    return trial.benchmark_verdict(result)


def smoke_prompts_errors(prompts, where='sglang_smoke_prompts'):
    return smoke.check_prompts(prompts, where)


def systemctl_show(text):
    return _systemd.parse_show(text)


class FilterModule(object):
    def filters(self):
        return {
            'trial_init': trial_init,
            'trial_outcome': trial_outcome,
            'trial_select': trial_select,
            'trial_verified': trial_verified,
            'systemctl_show': systemctl_show,
            'trial_check_mode': trial_check_mode,
            'fallback_used': fallback_used,
            'smoke_prompts_errors': smoke_prompts_errors,
            'trial_lost_server': trial_lost_server,
            'trial_after_smoke': trial_after_smoke,
            'benchmark_verdict': benchmark_verdict,
        }
