# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for the servers' Prometheus metrics (logic in module_utils/metrics.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import metrics


def metrics_args(host, enabled, labels=None, extra_args=None):
    errors = metrics.label_errors(labels)
    return {'errors': errors,
            'args': [] if errors else metrics.server_args(enabled, host, labels or {}, list(extra_args or []))}


def metrics_targets(hostvars, hosts):
    """The play's hosts' file_sd files: each host's report (report_host_report) and settings (preflight_settings)."""
    items = []
    for host in hosts or []:
        facts = hostvars[host]
        settings = facts.get('preflight_settings') or {}
        items.append({'host': host, 'report': facts.get('report_host_report'),
                      'service_name': settings.get('service_name'), 'metrics': settings.get('metrics')})
    return metrics.targets_files(items)


class FilterModule(object):
    def filters(self):
        return {'metrics_args': metrics_args, 'metrics_targets': metrics_targets}
