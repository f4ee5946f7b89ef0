# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_reset: the cases of test_gpu_reset.yaml."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.modules import gpu_reset
from ansible_collections.llmserve.sglang.tests.unit.plugins.modules.modcases import module_cases

test_gpu_reset = module_cases(gpu_reset, __file__)
