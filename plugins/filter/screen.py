# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the screen (dummy weights, truncated model); the logic lives in module_utils/screen.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible_collections.llmserve.sglang.plugins.module_utils import screen


def screen_args(extra_args, layers=4):
    try:
        return screen.screen_args(extra_args, layers)
    except ValueError as e:
        raise AnsibleFilterError('screen_args: %s' % e)


def screen_outcome(await_result, probe=None, seconds=0.0, recheck=None, layers=None):
    return screen.outcome(await_result, probe, seconds, recheck, layers)


def screen_wanted(candidate, settings=None, record=None, fingerprint=None, sglang_version=None):
    return screen.wanted(candidate, settings, record, fingerprint, sglang_version)


class FilterModule(object):
    def filters(self):
        return {
            'screen_args': screen_args,
            'screen_outcome': screen_outcome,
            'screen_wanted': screen_wanted,
        }
