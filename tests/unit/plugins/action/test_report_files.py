# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report_files (an action: it runs on the controller): the cases of test_report_files.yaml."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.action import report_files
from ansible_collections.llmserve.sglang.tests.unit.plugins.modules.modcases import module_cases

test_report_files = module_cases(report_files, __file__)
