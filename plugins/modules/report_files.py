#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: report_files
short_description: Write a run's report files into one directory on the controller
version_added: 0.2.0
description:
  - Writes each of O(files) (file name to text) into O(dest) on the Ansible controller, creating O(dest) (0755) when
    missing. A file whose content and mode are already right is left alone; the others are written to a temporary
    file in O(dest) and renamed, so a reader never sees half a file. A text that does not end with a newline gets one.
  - This is an action that runs on the controller itself, whatever the task's host is, without running a module or
    a Python process per file (what C(ansible.builtin.copy) or C(ansible.builtin.template) cost when
    delegated to C(localhost)). Render templates with the P(ansible.builtin.template#lookup) lookup.
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.action
attributes:
  check_mode:
    support: full
    details: Reports which files would be written and writes nothing.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
    description: Target OS/families that can be operated against.
    details: The files are written on the controller, whatever the task's host is.
options:
  dest:
    description: Directory on the controller.
    type: path
    required: true
  files:
    description: File name (a plain name, no V(/)) to its text.
    type: dict
    required: true
  mode:
    description: Mode of the files, as an octal string or number.
    type: raw
    default: '0644'
'''

EXAMPLES = r'''
- name: Write the report on the controller
  llmserve.sglang.report_files:
    dest: ./sglang-reports
    files:
      gpu01.json: "{{ report | to_nice_json }}"
      report.md: "{{ lookup('ansible.builtin.template', 'report.md.j2') }}"
  run_once: true
'''

RETURN = r'''
dest:
  description: The directory, as an absolute path.
  returned: success
  type: str
  sample: /home/me/sglang-reports
written:
  description: Names of the files written (in check mode, those that would be).
  returned: success
  type: list
  elements: str
  sample: [gpu01.json, report.md]
unchanged:
  description: Names of the files that were already right.
  returned: success
  type: list
  elements: str
  sample: []
'''
