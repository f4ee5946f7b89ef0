# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""smoke_generate: the cases of test_smoke_generate.yaml."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.modules import smoke_generate
from ansible_collections.llmserve.sglang.tests.unit.plugins.modules.modcases import module_cases

test_smoke_generate = module_cases(smoke_generate, __file__)
