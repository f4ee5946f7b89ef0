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

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.error import HTTPError
from ansible.module_utils.urls import open_url

from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_install as si
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_flags


def _inspect(module, params):
    rc, out, err = module.run_command(si.inspect_argv(params['python'], params['extras'], params['kernel_module']))
    state = si.parse_inspect(out)
    if state is None:
        module.fail_json(msg='sglang_python=%s does not run (rc=%s): %s' % (
            params['python'], rc, ' | '.join((err or out or '').strip().splitlines()[-3:])))
    return state


def _free_gib(path):
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    st = os.statvfs(path or '/')
    return st.f_bavail * st.f_frsize / float(1024 ** 3)


def _driver(module):
    smi = module.get_bin_path('nvidia-smi')
    if not smi:
        return None, 'nvidia-smi is not there'
    rc, out, err = module.run_command([smi, '--query-gpu=driver_version', '--format=csv,noheader'])
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    if rc != 0 or not lines:
        return None, 'nvidia-smi failed (rc=%s): %s' % (rc, (err or out).strip()[:200])
    return lines[0], None


def _probe(index_url):
    """'' when the index answers for the sglang project (any HTTP status), else why it cannot be reached."""
    try:
        open_url(si.probe_url(index_url), timeout=10, validate_certs=True)
    except HTTPError:
        return ''
    except Exception as exc:  # pylint: disable=broad-except
        return str(getattr(exc, 'reason', None) or exc)
    return ''


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type='path', required=True),
            version=dict(type='str', required=True),
            extras=dict(type='list', elements='str', default=[]),
            index_url=dict(type='str', default=''),
            installer=dict(type='str', default='auto', choices=['auto', 'pip', 'uv']),
            uv=dict(type='str', default='uv'),
            isolated=dict(type='bool', default=False),
            extra_args=dict(type='list', elements='str', default=[]),
            kernel_module=dict(type='str', default='sgl_kernel'),
            min_free_gb=dict(type='float', default=30),
            driver_check=dict(type='bool', default=True),
            min_driver=dict(type='str', default=''),
            base_python=dict(type='str', default='python3'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    password = si.url_password(p['index_url'])
    if password:
        module.no_log_values.add(password)
    p['version'] = str(p['version']).strip()
    p['extras'] = sorted(set(str(e).strip() for e in p['extras']))
    result = dict(changed=False, version=None, version_before=None, reason='', installer=None, packages=[],
                  python_version=None, driver_version=None, min_driver=si.min_driver(p['version'], p['min_driver']))
    errors = si.validate(p)
    if errors:
        module.fail_json(msg='invalid input, nothing was changed: ' + '; '.join(errors), **result)
    spec = si.requirement(p['version'], p['extras'])

    exists = os.access(p['python'], os.X_OK)
    state = _inspect(module, p) if exists else None
    if state:
        result['python_version'] = state.get('python')
        result['version_before'] = state.get('version')
        if state.get('unknown_extras'):
            module.fail_json(msg='sglang_extras: sglang %s has no extra %s' % (
                state.get('version'), ', '.join(state['unknown_extras'])), **result)
    needed, result['reason'] = si.compare(state, p['version'], p['extras'])

    installer = p['installer']
    uv = module.get_bin_path(p['uv']) if not os.path.isabs(p['uv']) else (p['uv'] if os.access(p['uv'], os.X_OK) else None)
    if installer == 'auto':
        installer = 'uv' if uv else 'pip'
    if installer == 'uv' and not uv:
        module.fail_json(msg='sglang_installer=uv but %s is not found on the host: install uv or choose pip'
                         % p['uv'], **result)
    result['installer'] = installer

    if not needed:
        _verify(module, p, result, state)
        module.exit_json(**result)

    # before an install: Python, driver, disk
    if not exists:
        base = p['base_python']
        rc, out, err = module.run_command([base, '-c', 'import sys; print("%d.%d.%d" % sys.version_info[:3])'])
        if rc != 0:
            module.fail_json(msg='sglang_python=%s does not exist and %s cannot make its venv (rc=%s): %s' % (
                p['python'], base, rc, (err or out).strip()[:200]), **result)
        result['python_version'] = out.strip()
    if not si.python_ok(result['python_version']):
        module.fail_json(msg='sglang_python=%s is Python %s: SGLang needs 3.11 or newer; point sglang_python at a '
                         'venv made with Python 3.11+' % (p['python'], result['python_version']), **result)
    if p['driver_check']:
        have, error = _driver(module)
        result['driver_version'] = have
        if error:
            module.fail_json(msg='no NVIDIA driver could be read (%s): SGLang %s needs driver %s or newer; install '
                             'it, or set sglang_install_driver_check: false on a host that only prepares the venv'
                             % (error, p['version'], result['min_driver']), **result)
        if not si.driver_ok(have, result['min_driver']):
            module.fail_json(msg='the NVIDIA driver %s is too old for SGLang %s (its wheels are built for CUDA %s, '
                             'which needs driver %s or newer): upgrade the driver or pin an older sglang_version'
                             % (have, p['version'], si.wheel_cuda(p['version']), result['min_driver']), **result)
    free = _free_gib(os.path.dirname(os.path.dirname(p['python'])))
    if free < p['min_free_gb']:
        module.fail_json(msg='%.1f GiB free where the venv of sglang_python=%s lies, %s needed '
                         '(sglang_install_min_free_gb): free some space first' % (free, p['python'], p['min_free_gb']),
                         **result)

    created = False
    venv = os.path.dirname(os.path.dirname(p['python']))
    if not exists:
        if module.check_mode:
            result.update(changed=True, version=p['version'])
            module.exit_json(**result)
        rc, out, err = module.run_command([p['base_python'], '-m', 'venv', venv])
        if rc != 0 or not os.access(p['python'], os.X_OK):
            module.fail_json(msg='making the venv %s with %s failed (rc=%s): %s; sglang_python must be '
                             '<venv>/bin/python3' % (venv, p['base_python'], rc, (err or out).strip()[-300:]), **result)
        created = True

    def fail(msg):
        if created:
            shutil.rmtree(venv, ignore_errors=True)
        module.fail_json(msg=msg, **result)

    env = si.installer_env(installer, p['index_url'], p['isolated'])
    tmp = tempfile.mkdtemp(prefix='llmserve-sglang-install-')
    try:
        report = os.path.join(tmp, 'report.json')
        argv = si.installer_argv(installer, p['python'], spec, p['index_url'], p['extra_args'], dry_run=True,
                                 report=report, isolated=p['isolated'], uv=uv or p['uv'])
        rc, out, err = module.run_command(argv, environ_update=env)
        if rc != 0:
            fail(si.error_message(rc, out, err, spec, p['index_url'],
                                  unreachable=_probe(p['index_url']) if si.needs_probe(out, err, p['index_url']) else ''))
        text = ''
        if os.path.exists(report):
            with open(report) as handle:
                text = handle.read()
        result['packages'] = si.parse_dry_run(installer, text, out + '\n' + err)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result.update(changed=True, version=p['version'])
    if module.check_mode:
        module.exit_json(**result)

    argv = si.installer_argv(installer, p['python'], spec, p['index_url'], p['extra_args'],
                             isolated=p['isolated'], uv=uv or p['uv'])
    rc, out, err = module.run_command(argv, environ_update=env)
    if rc != 0:
        fail(si.error_message(rc, out, err, spec, p['index_url'], dry_run=False))
    _verify(module, p, result, _inspect(module, p))
    module.exit_json(**result)


def _verify(module, p, result, state):
    """import sglang gives the version, the kernel imports, the flag table reads; else fail."""
    if not state.get('installed') or state.get('version') != p['version']:
        module.fail_json(msg='after the install, sglang_python=%s has sglang %s, not %s' % (
            p['python'], state.get('version'), p['version']), **result)
    if state.get('kernel_error'):
        module.fail_json(msg='sglang %s is installed but its kernel package does not load: %s (is the NVIDIA '
                         'driver library there, and new enough?)' % (p['version'], state['kernel_error']), **result)
    flags = sglang_flags.read_installed(module.run_command, p['python'])
    result['version'] = p['version']
    result['option_count'] = len(flags.get('options') or [])
    if not flags.get('installed') or not result['option_count']:
        module.fail_json(msg='sglang %s is installed but its flag table does not read: %s' % (
            p['version'], flags.get('error')), **result)


if __name__ == '__main__':
    main()
