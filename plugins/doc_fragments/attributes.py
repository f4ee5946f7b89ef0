# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    # Standard documentation fragment
    DOCUMENTATION = r'''
options: {}
attributes:
  check_mode:
    description: Can run in C(check_mode) and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in C(diff_mode)), when in diff mode.
'''

    # an action plugin's module: the action runs on the controller, not async, once per host
    ACTION = r'''
options: {}
attributes:
  action:
    support: full
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
  async:
    support: none
    description: Supports being used with the C(async) keyword.
  bypass_host_loop:
    support: none
    description: Forces a 'global' task that does not execute per host, this bypasses per host templating and serial,
      throttle and other loop considerations.
'''

    PLATFORM = r'''
options: {}
attributes:
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
'''

    NVIDIA_SMI = r'''
options:
  nvidia_smi:
    description:
      - Name or path of C(nvidia-smi) on the target.
      - A bare name is looked up on E(PATH) and the usual system directories.
    type: str
    default: nvidia-smi
'''
