# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""trial_snapshot: the cases of test_trial_snapshot.yaml."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.modules import trial_snapshot
from ansible_collections.llmserve.sglang.tests.unit.plugins.modules.modcases import module_cases

test_trial_snapshot = module_cases(trial_snapshot, __file__)
