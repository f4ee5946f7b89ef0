# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""deploy_lock: the cases of test_deploy_lock.yaml."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.modules import deploy_lock
from ansible_collections.llmserve.sglang.tests.unit.plugins.modules.modcases import module_cases

test_deploy_lock = module_cases(deploy_lock, __file__)
