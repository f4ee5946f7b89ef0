# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_launch: the cases of test_sglang_launch.yaml."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.modules import sglang_launch
from ansible_collections.llmserve.sglang.tests.unit.plugins.modules.modcases import module_cases

test_sglang_launch = module_cases(sglang_launch, __file__)
