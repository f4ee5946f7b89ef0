# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host_report filter: a host's report (logic in module_utils/report.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import report


def host_report(host, gpu, sglang_version, outcome, final_state, check_mode, group, head_address, port):
    return report.host_report(host, dict(gpu or {}), sglang_version, dict(outcome or {}), final_state, check_mode,
                              dict(group or {}), head_address, port)


def host_reports(hostvars, hosts):
    """The reports (``report_host_report``) of those ``hosts`` that have one, in their order."""
    return [hostvars[h]['report_host_report'] for h in hosts or [] if hostvars[h].get('report_host_report')]


class FilterModule(object):
    def filters(self):
        return {'host_report': host_report, 'host_reports': host_reports}
