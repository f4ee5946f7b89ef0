# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for serving groups (multi-node tensor parallel); the logic lives in module_utils/serving_group.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.llmserve.sglang.plugins.module_utils import serving_group as sg
from ansible_collections.llmserve.sglang.plugins.module_utils import redact


def _get(hostvars, host, key):
    try:
        return hostvars[host].get(key)
    except (KeyError, AttributeError):
        return None


def serving_group(hostvars, me, play_hosts, inventory_hosts):
    """-> {'errors': [...], 'group': {...} or None} for host ``me``."""
    summaries = {}
    for host in play_hosts:
        summary = _get(hostvars, host, 'preflight_member')
        if isinstance(summary, dict):
            summaries[host] = summary
    if me not in summaries:
        raise AnsibleFilterError('serving_group: %s has no preflight_member fact' % me)
    # members in this play say their group themselves (play vars count); others are found in the inventory
    groups = dict((host, summary.get('group')) for host, summary in summaries.items() if summary.get('group'))
    for host in inventory_hosts:
        if host not in summaries:
            name = _get(hostvars, host, 'sglang_group')
            if name:
                groups[host] = name
    errors, group = sg.check_group(me, summaries, groups, list(play_hosts))
    # a message that shows two members' env shows no secret of it
    secrets = redact.deploy_secret_values(None, summaries[me].get('env'), summaries[me].get('candidates'),
                                          summaries[me].get('known_good'))
    return {'errors': [redact.redact_text(e, secrets) for e in errors], 'group': group}


def group_await(hostvars, group, fact):
    """The group's await verdict from each member's registered ``fact`` (for example backend_trial_await)."""
    results = {}
    for member in group.get('members') or []:
        value = _get(hostvars, member['host'], fact)
        results[member['host']] = value if isinstance(value, dict) else {}
    return sg.combine_await(group, results)


def group_failing(hostvars, group, fact, check):
    """The members whose ``fact`` fails ``check`` (failed, not_ready, not_serving): [{host, rank}]."""
    values = dict((m['host'], _get(hostvars, m['host'], fact)) for m in group.get('members') or [])
    try:
        return sg.members_failing(group, values, check)
    except ValueError as exc:
        raise AnsibleFilterError('group_failing: %s' % exc)


def group_reuse(hostvars, group):
    """The configuration the group reuses, '' for none: each member's check-mode launch of its recorded configuration
    (``preflight_reuse_check``) against the name its plan recorded (``preflight_plan_result.reuse.recorded``)."""
    choices = {}
    for member in group.get('members') or []:
        plan = _get(hostvars, member['host'], 'preflight_plan_result')
        recorded = ((plan or {}).get('reuse') or {}).get('recorded') if isinstance(plan, dict) else None
        choices[member['host']] = sg.reuse_of(recorded, _get(hostvars, member['host'], 'preflight_reuse_check'))
    return sg.agreed_reuse(group, choices)


def stop_order(group, node_rank=0):
    """``head``, ``member`` or ``single``: when a clean-up stops this host's unit (a group's rank 0 first)."""
    try:
        return sg.stop_order(group, node_rank)
    except ValueError as exc:
        raise AnsibleFilterError('stop_order: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {
            'serving_group': serving_group,
            'group_await': group_await,
            'group_failing': group_failing,
            'group_reuse': group_reuse,
            'stop_order': stop_order,
        }
