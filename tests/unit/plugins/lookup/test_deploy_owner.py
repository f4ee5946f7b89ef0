# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""deploy_owner: the ansible-playbook PID from the main process and from a forked worker."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import multiprocessing
import os
import socket

from ansible_collections.llmserve.sglang.plugins.lookup import deploy_owner


def _in_worker(queue):
    queue.put(deploy_owner.owner(now=1795986656.7))


def test_main_process_is_the_owner():
    got = deploy_owner.owner(now=1795986656.7)
    assert got == {'controller': socket.gethostname(), 'pid': os.getpid(), 'since': 1795986656}


def test_forked_worker_names_its_parent():
    # Ansible runs lookups in a WorkerProcess forked from ansible-playbook: the owner is the parent, not the worker
    ctx = multiprocessing.get_context('fork')
    queue = ctx.Queue()
    worker = ctx.Process(target=_in_worker, args=(queue,))
    worker.start()
    got = queue.get(timeout=30)
    worker.join(30)
    assert got['pid'] == os.getpid() != worker.pid
    assert got['controller'] == socket.gethostname()


def test_lookup_returns_one_dict():
    result = deploy_owner.LookupModule().run([], variables={})
    assert len(result) == 1 and set(result[0]) == {'controller', 'pid', 'since'}
