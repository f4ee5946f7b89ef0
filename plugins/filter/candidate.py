# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The candidate_entry filter: record a stage in a candidate's report entry (logic in module_utils/candidate.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible_collections.llmserve.sglang.plugins.filter import diagnose
from ansible_collections.llmserve.sglang.plugins.module_utils import candidate as entries


def candidate_entry(by_name, candidate, stage, results=None, seconds=None, context=None):
    """``context``: ``signatures`` (the whole table), else ``extra_signatures`` (the user's, ahead of the shipped
    table); ``arch``, ``flags``, ``layers`` (module_utils/candidate.py)."""
    context = dict(context or {})
    if context.get('signatures') is None and stage in entries.DIAGNOSED:
        context['signatures'] = diagnose.with_shipped(context.pop('extra_signatures', None))
    try:
        return entries.record(by_name, candidate, stage, results, seconds, context)
    except ValueError as e:
        raise AnsibleFilterError(str(e))


class FilterModule(object):
    def filters(self):
        return {'candidate_entry': candidate_entry}
