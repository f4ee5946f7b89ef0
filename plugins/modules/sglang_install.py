#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: sglang_install
short_description: Install a pinned SGLang release into the venv of a Python interpreter
version_added: 0.3.0
description:
  - Installs C(sglang==VERSION), with extras, into the venv that O(python) belongs to, with pip or uv, from PyPI,
    a site's own package index or a wheelhouse folder on the host.
  - Nothing is installed when that version is there and every requirement of every wanted extra is satisfied.
  - "Before: Python 3.11 or newer in the venv, an NVIDIA driver new enough for the CUDA the wheels are built for
    (SGLang 0.5.20 and newer: CUDA 13, driver 580.65.06 or newer), O(min_free_gb) free on the venv's file system."
  - Then a dry run (C(pip install --dry-run), C(uv pip install --dry-run)) resolves the pinned version and its
    dependencies from the index without changing the venv, so that a version the index does not have, or an index
    that cannot be reached, fails before anything is touched and the venv keeps working.
  - "After: C(import sglang) gives the version, the kernel package (O(kernel_module)) imports, and SGLang's flag
    table reads (C(ServerArgs.add_cli_args)); otherwise the module fails and says which."
  - The venv is made with O(base_python) when O(python) does not exist yet (removed again when that first install
    fails).
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.platform
attributes:
  check_mode:
    support: full
    details: Checks the inputs, the Python, the driver and the disk, and runs the dry run in an existing venv;
      reports C(changed) and RV(packages) as the install would, and changes nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  python:
    description: Absolute path of the Python interpreter of the venv (the deploy's C(sglang_python)).
    type: path
    required: true
  version:
    description: The SGLang release to install, one pinned version such as V(0.5.23).
    type: str
    required: true
  extras:
    description: Extras of the C(sglang) distribution to install with it, for example V([all]).
    type: list
    elements: str
    default: []
  index_url:
    description:
      - URL of the package index (PEP 503 simple API, for example V(https://pypi.example.internal/simple)) instead of
        the one pip or uv is configured with (PyPI by default). Passed in the environment, not on the command line.
        A password in it is never shown.
      - An absolute path is a wheelhouse folder on the host (C(--no-index --find-links)), for air-gapped sites.
      - A plain C(http://) index's host is trusted (C(PIP_TRUSTED_HOST), C(UV_INSECURE_HOST)).
    type: str
    default: ""
  installer:
    description: V(pip) (C(python -m pip)), V(uv) (C(uv pip install --python)), or V(auto), uv when O(uv) is found.
    type: str
    choices: [auto, pip, uv]
    default: auto
  uv:
    description: The uv program, a name looked up in C(PATH) or an absolute path.
    type: str
    default: uv
  isolated:
    description: Do not read the host's pip configuration files (C(PIP_CONFIG_FILE=/dev/null); uv C(--no-config)).
    type: bool
    default: false
  extra_args:
    description: More arguments for pip or uv install, for example V([--retries, "1"]).
    type: list
    elements: str
    default: []
  kernel_module:
    description: The Python module of SGLang's kernel package that must import after the install; empty skips it.
    type: str
    default: sgl_kernel
  min_free_gb:
    description: GiB that must be free on the venv's file system before an install.
    type: float
    default: 30
  driver_check:
    description: Check the NVIDIA driver (C(nvidia-smi)) before an install; V(false) for a host that only prepares the venv.
    type: bool
    default: true
  min_driver:
    description: The minimum driver version; empty takes it from the CUDA the wheels of O(version) are built for.
    type: str
    default: ""
  base_python:
    description: The interpreter that makes the venv when O(python) does not exist (C(BASE -m venv DIR)).
    type: str
    default: python3
seealso:
  - module: llmserve.sglang.gpu_info
'''

EXAMPLES = r'''
- name: Install SGLang 0.5.23 into /opt/sglang from the site's index
  llmserve.sglang.sglang_install:
    python: /opt/sglang/bin/python3
    version: 0.5.23
    index_url: https://pypi.example.internal/simple
  register: install

- name: From a wheelhouse folder, on an air-gapped host
  llmserve.sglang.sglang_install:
    python: /opt/sglang/bin/python3
    version: 0.5.23
    index_url: /srv/wheelhouse
'''

RETURN = r'''
version:
  description: The SGLang version installed now (in check mode the one that would be).
  returned: success
  type: str
  sample: 0.5.23
version_before:
  description: The SGLang version that was installed before, null when none was.
  returned: always
  type: str
reason:
  description: Why something was (or was not) installed.
  returned: always
  type: str
  sample: sglang 0.5.22 is installed, 0.5.23 is wanted
installer:
  description: V(pip) or V(uv).
  returned: always
  type: str
packages:
  description: What the install put in (from the dry run), each C(name) and C(version); empty when nothing changed.
  returned: always
  type: list
  elements: dict
python_version:
  description: The venv's Python version.
  returned: always
  type: str
driver_version:
  description: The host's NVIDIA driver, null when not checked.
  returned: always
  type: str
min_driver:
  description: The driver the wheels need.
  returned: always
  type: str
option_count:
  description: How many flags SGLang's flag table holds after the install.
  returned: success
  type: int
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmserve.sglang.plugins.module_utils import _install


def main():
    module = AnsibleModule(argument_spec=_install.argument_spec(), supports_check_mode=True)
    _install.run(module)


if __name__ == '__main__':
    main()
