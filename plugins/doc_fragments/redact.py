# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    DOCUMENTATION = r'''
options:
  redact_values:
    description:
      - Secret values (the API key, tokens of C(sglang_env)) to mask as C(********) wherever they appear in what the
        module returns (command lines of processes, log lines, messages, warnings).
      - >-
        Whatever this option says, the module also masks the value after C(--api-key)/C(--admin-api-key) on a command
        line, C('api_key': '...') in the C(server_args=) line SGLang logs at start-up, and C(NAME=value) of a variable
        whose name has C(KEY), C(TOKEN), C(SECRET), C(PASSWORD) or C(CREDENTIAL) in it.
      - Values shorter than 4 characters are not searched for.
    type: list
    elements: str
    default: []
'''
