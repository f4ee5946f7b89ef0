# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deploy_lock_verdict filter: judge a deploy lock on the controller (logic in module_utils/deploy_lock.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import deploy_lock


def deploy_lock_verdict(result, owner, lock_dir, stale_after, host):
    return deploy_lock.verdict(dict(result or {}), dict(owner or {}), lock_dir, stale_after, host,
                               deploy_lock.proc_cmdline)


class FilterModule(object):
    def filters(self):
        return {'deploy_lock_verdict': deploy_lock_verdict}
