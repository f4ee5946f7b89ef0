# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
name: deploy_owner
short_description: Who runs this deploy - the controller's host name and the PID of its ansible-playbook process
version_added: 0.2.0
description:
  - Returns one dict, the owner a host's deploy lock records (M(llmserve.sglang.deploy_lock)), read in Python on the
    controller (no shell).
  - V(pid) is the C(ansible-playbook) process itself, also when the lookup runs in one of its forked workers (the
    worker's multiprocessing parent), so a later run can tell whether that process is still there.
author:
  - llmserve maintainers (@llmserve)
options: {}
'''

EXAMPLES = r'''
- name: Identify this run
  ansible.builtin.set_fact:
    owner: "{{ lookup('llmserve.sglang.deploy_owner') }}"
'''

RETURN = r'''
_raw:
  description: One dict.
  type: list
  elements: dict
  contains:
    controller:
      description: The controller's host name.
      type: str
    pid:
      description: The PID of the C(ansible-playbook) process.
      type: int
    since:
      description: The time of the call in whole seconds since the epoch.
      type: int
'''

import multiprocessing
import os
import socket
import time

from ansible.plugins.lookup import LookupBase


def playbook_pid():
    """The ansible-playbook process: this process, or its multiprocessing parent when this is a forked worker."""
    parent = multiprocessing.parent_process()
    return parent.pid if parent is not None and parent.pid else os.getpid()


def owner(now=None):
    return {'controller': socket.gethostname(), 'pid': playbook_pid(),
            'since': int(time.time() if now is None else now)}


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        return [owner()]
