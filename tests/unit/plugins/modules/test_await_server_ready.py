# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""await_server_ready: the cases of test_await_server_ready.yaml."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.modules import await_server_ready
from ansible_collections.llmserve.sglang.tests.unit.plugins.modules.modcases import module_cases

test_await_server_ready = module_cases(await_server_ready, __file__)
