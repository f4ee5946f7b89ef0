#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: model_check
short_description: Check that a model folder is there and whole before SGLang loads it
version_added: 0.2.0
description:
  - Reads the model folder on the host, without loading anything, and says what is missing or broken.
  - The folder passes when C(config.json) reads as a JSON object, the weights are there and a tokenizer is there.
  - Weights with an index (C(model.safetensors.index.json) or C(pytorch_model.bin.index.json)) pass when every file
    its C(weight_map) names exists, none is empty, and together they hold at least the index's
    C(metadata.total_size) bytes (a partial download holds less). Without an index at least one C(*.safetensors),
    C(*.bin), C(*.pt) or C(*.gguf) file that is not empty must be there.
  - A tokenizer is C(tokenizer.json), C(tokenizer.model), C(tiktoken.model), or C(vocab.json) with C(merges.txt).
  - A hub repo id (C(owner/name)) is reported as such (RV(kind)=V(repo_id)) with an error, since SGLang would
    download it during the first trial.
  - Never fails for a bad model; RV(errors) says what is wrong, naming O(where).
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.platform
attributes:
  check_mode:
    support: full
    details: Reads only; the same result as without check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  path:
    description: The model folder (the value of C(--model-path)), or a repo id.
    type: str
    required: true
  where:
    description: How the messages name the path (the public variable behind it).
    type: str
    default: sglang_model_path
'''

EXAMPLES = r'''
- name: Check the model before the trials
  llmserve.sglang.model_check:
    path: /models/Qwen3.5-397B-A17B-NVFP4
  register: model

- name: Stop on a missing or partial model
  ansible.builtin.fail:
    msg: "{{ model.errors | join('; ') }}"
  when: model.errors | length > 0
'''

RETURN = r'''
kind:
  description: V(folder), V(repo_id) (a hub repo id, not a folder) or V(missing) (no such folder).
  returned: always
  type: str
errors:
  description: What is missing or broken, each naming O(where) and the path; empty when the model can be loaded.
  returned: always
  type: list
  elements: str
missing:
  description: The files that are not there (shards the index names, C(config.json), a tokenizer).
  returned: always
  type: list
  elements: str
shards:
  description: The number of weight files found.
  returned: always
  type: int
bytes:
  description: Their size together.
  returned: always
  type: int
index_total_size:
  description: The index's C(metadata.total_size), null without an index.
  returned: always
  type: int
tokenizer:
  description: The tokenizer files found.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmserve.sglang.plugins.module_utils import model_check


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='str', required=True),
            where=dict(type='str', default='sglang_model_path'),
        ),
        supports_check_mode=True,
    )
    result = model_check.check(module.params['path'], where=module.params['where'])
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
