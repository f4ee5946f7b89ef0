# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus metrics of the servers: SGLang's own flags, and the ``file_sd`` targets a Prometheus reads.

SGLang serves ``/metrics`` on its API port with ``--enable-metrics`` (no API key needed) and adds the labels of
``--extra-metric-labels '{"k": "v"}'`` to its own series (``model_name``, ``engine_type``, ...). The collection turns
both on unless ``sglang_metrics`` is false, with the host's inventory name as the ``host`` label.
Pure functions, stdlib only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

ENABLE_FLAG = '--enable-metrics'
LABELS_FLAG = '--extra-metric-labels'
LABEL_NAME_RE = re.compile(r'^[a-zA-Z_][a-zA-Z0-9_]*$')
# SGLang's own label names: an extra label of the same name would clash with them
SGLANG_LABELS = ('model_name', 'engine_type', 'tp_rank', 'pp_rank', 'moe_ep_rank', 'is_streaming', 'le')
# the labels each file_sd target carries (the server's own series already carry ``host``)
TARGET_LABELS = ('sglang_host', 'sglang_service')
# a report state after which the host's target file is left as it is
KEEP_STATES = ('rolled_back', 'check_mode')


def _given(extra_args, flag):
    """Whether ``flag`` is among ``extra_args`` (alone or as ``flag=value``)."""
    return any(str(a) == flag or str(a).startswith(flag + '=') for a in extra_args or [])


def label_errors(labels):
    """``sglang_metric_labels`` -> the errors, each naming the variable and the fix."""
    if labels in (None, ''):
        return []
    if not isinstance(labels, dict):
        return ['sglang_metric_labels must be a mapping of label name to value, such as {"cluster": "eu1"}; got %r'
                % (labels,)]
    errors = []
    for name in sorted(labels, key=str):
        if not LABEL_NAME_RE.match(str(name)):
            errors.append('sglang_metric_labels: %r is not a Prometheus label name (letters, digits and _, not '
                          'starting with a digit)' % (name,))
        elif name in SGLANG_LABELS or str(name).startswith('__'):
            errors.append('sglang_metric_labels: %r is a label SGLang or Prometheus sets itself: choose another '
                          'name' % (name,))
        elif isinstance(labels[name], (dict, list)):
            errors.append('sglang_metric_labels.%s must be a string, not %s' % (name, type(labels[name]).__name__))
    return errors


def server_args(enabled, host, labels=None, extra_args=None):
    """The flags to add to the server's arguments: ``--enable-metrics`` and ``--extra-metric-labels`` with
    ``{"host": host}`` and ``labels`` (``sglang_metric_labels``, which may replace ``host``). A flag that
    ``extra_args`` (``sglang_extra_args``) already gives is left to it; nothing when ``enabled`` is false."""
    if not enabled:
        return []
    out = [] if _given(extra_args, ENABLE_FLAG) else [ENABLE_FLAG]
    if not _given(extra_args, LABELS_FLAG):
        merged = {'host': str(host)}
        merged.update(dict((str(k), str(v)) for k, v in (labels or {}).items()))
        out += [LABELS_FLAG, json.dumps(merged, sort_keys=True)]
    return out


def enabled_in(args):
    """Whether a server started with ``args`` serves /metrics."""
    return _given(args, ENABLE_FLAG)


def file_sd(report, service_name, enabled):
    """The Prometheus ``file_sd`` target groups of one host's report (module_utils/report.py ``host_report``):
    its server's address and port while it serves with metrics on; none (an empty list, so that Prometheus drops
    the target) when it does not serve; None (leave the file as it is) when the run changed nothing there: a
    rollback restored the previous unit, or check mode. A serving group is one target, its rank 0's (the other
    ranks serve no API), in the file of rank 0's host."""
    state = (report or {}).get('final_state')
    if state in KEEP_STATES:
        return None
    if not enabled or state != 'serving':
        return []
    group = report.get('group') or {}
    if group and group.get('head') not in (None, report.get('host')):
        return []
    endpoint = str(report.get('endpoint') or '')
    address = endpoint.split('://', 1)[-1].rstrip('/')
    if not address:
        return []
    return [{'targets': [address], 'labels': {'sglang_host': report.get('host'), 'sglang_service': service_name}}]


def targets_files(hosts):
    """``hosts``: one dict per host of the play (``host``, ``report``, ``service_name``, ``metrics``) -> the
    ``file_sd`` files to write, ``{HOST.json: text}``; a host without a report (it stopped before it) or whose
    targets stay as they were gets no file."""
    out = {}
    for item in hosts or []:
        if not item.get('report'):
            continue
        groups = file_sd(item['report'], item.get('service_name'), bool(item.get('metrics')))
        if groups is not None:
            out['%s.json' % item['host']] = json.dumps(groups, indent=2, sort_keys=True) + '\n'
    return out


IN_FLIGHT = ('num_running_reqs', 'num_queue_reqs')


def in_flight(text):
    """Requests running or queued on a server, from its ``/metrics`` text (``sglang:num_running_reqs`` and
    ``sglang:num_queue_reqs``, summed over their label sets, such as data-parallel ranks); None when the text has
    neither (metrics off, or not SGLang's)."""
    total, seen = 0.0, False
    for line in str(text or '').splitlines():
        if not line.startswith('sglang'):
            continue
        name = line.split('{', 1)[0].split(' ', 1)[0]
        if name.replace(':', '_') not in ['sglang_' + n for n in IN_FLIGHT]:
            continue
        try:
            total += float(line.rsplit(' ', 1)[1])
        except (IndexError, ValueError):
            continue
        seen = True
    return int(total) if seen else None
