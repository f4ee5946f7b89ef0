# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""model_check: the cases of test_model_check.yaml."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.modules import model_check
from ansible_collections.llmserve.sglang.tests.unit.plugins.modules.modcases import module_cases

test_model_check = module_cases(model_check, __file__)
