# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that keep secrets out of output; the logic lives in module_utils/redact.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import redact as redactlib


def secret_values(api_key, env=None, candidates=None, known_good=None):
    return redactlib.deploy_secret_values(api_key, env, candidates, known_good)


def redact(data, values=None):
    return redactlib.redact(data, values or [])


class FilterModule(object):
    def filters(self):
        return {
            'secret_values': secret_values,
            'redact': redact,
        }
