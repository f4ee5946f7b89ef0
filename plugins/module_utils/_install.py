# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The work of the sglang_install module: inspect -> checks -> venv -> dry run -> install -> verify.

``run(module)`` takes an AnsibleModule with sglang_install's options. It inspects the venv of ``python``; when the
pinned version and every wanted extra are there it only verifies them. Otherwise it checks the Python, the NVIDIA
driver and the free disk, makes the venv when ``python`` does not exist yet (``base_python -m venv``), resolves the
install with a dry run, installs with pip or uv, verifies the import, the kernel package and the flag table, and
exits the module with the result. ``sglang_install`` holds the decisions (argv, messages, parsing) as pure functions.

Private to this collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import tempfile

from ansible.module_utils.six.moves.urllib.error import HTTPError
from ansible.module_utils.urls import open_url

from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_flags
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_install as si


def inspect(module, params):
    """What is installed in the venv of ``python`` (``si.parse_inspect``); fail when that Python does not run."""
    rc, out, err = module.run_command(si.inspect_argv(params['python'], params['extras'], params['kernel_module']))
    state = si.parse_inspect(out)
    if state is None:
        module.fail_json(msg='sglang_python=%s does not run (rc=%s): %s' % (
            params['python'], rc, ' | '.join((err or out or '').strip().splitlines()[-3:])))
    return state


def free_gib(path):
    """GiB free on the file system of ``path`` (of its nearest existing parent)."""
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    st = os.statvfs(path or '/')
    return st.f_bavail * st.f_frsize / float(1024 ** 3)


def driver(module):
    """``(driver_version, None)`` from nvidia-smi, or ``(None, why not)``."""
    smi = module.get_bin_path('nvidia-smi')
    if not smi:
        return None, 'nvidia-smi is not there'
    rc, out, err = module.run_command([smi, '--query-gpu=driver_version', '--format=csv,noheader'])
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    if rc != 0 or not lines:
        return None, 'nvidia-smi failed (rc=%s): %s' % (rc, (err or out).strip()[:200])
    return lines[0], None


def probe(index_url):
    """'' when the index answers for the sglang project (any HTTP status), else why it cannot be reached."""
    try:
        open_url(si.probe_url(index_url), timeout=10, validate_certs=True)
    except HTTPError:
        return ''
    except Exception as exc:  # pylint: disable=broad-except
        return str(getattr(exc, 'reason', None) or exc)
    return ''


def find_uv(module, uv):
    """The uv program: ``uv`` looked up in PATH, or the absolute path when it is executable; else None."""
    if not os.path.isabs(uv):
        return module.get_bin_path(uv)
    return uv if os.access(uv, os.X_OK) else None


class Install(object):
    """One run of sglang_install on an AnsibleModule: the steps in the order :func:`run` calls them."""

    def __init__(self, module):
        self.module = module
        self.p = p = module.params
        password = si.url_password(p['index_url'])
        if password:
            module.no_log_values.add(password)
        p['version'] = str(p['version']).strip()
        p['extras'] = sorted(set(str(e).strip() for e in p['extras']))
        self.result = dict(changed=False, version=None, version_before=None, reason='', installer=None, packages=[],
                           python_version=None, driver_version=None,
                           min_driver=si.min_driver(p['version'], p['min_driver']))
        self.venv = os.path.dirname(os.path.dirname(p['python']))
        self.spec = self.state = self.uv = self.env = None
        self.exists = self.needed = self.created = False

    def fail(self, msg):
        """Fail the module; a venv this run made is removed first."""
        if self.created:
            shutil.rmtree(self.venv, ignore_errors=True)
        self.module.fail_json(msg=msg, **self.result)

    # ---- before any change
    def validate(self):
        errors = si.validate(self.p)
        if errors:
            self.module.fail_json(msg='invalid input, nothing was changed: ' + '; '.join(errors), **self.result)
        self.spec = si.requirement(self.p['version'], self.p['extras'])

    def inspect_venv(self):
        """What the venv holds now, and whether an install is needed (``reason`` says why)."""
        p, result = self.p, self.result
        self.exists = os.access(p['python'], os.X_OK)
        self.state = inspect(self.module, p) if self.exists else None
        if self.state:
            result['python_version'] = self.state.get('python')
            result['version_before'] = self.state.get('version')
            if self.state.get('unknown_extras'):
                self.module.fail_json(msg='sglang_extras: sglang %s has no extra %s' % (
                    self.state.get('version'), ', '.join(self.state['unknown_extras'])), **result)
        self.needed, result['reason'] = si.compare(self.state, p['version'], p['extras'])

    def choose_installer(self):
        p = self.p
        installer = p['installer']
        self.uv = find_uv(self.module, p['uv'])
        if installer == 'auto':
            installer = 'uv' if self.uv else 'pip'
        if installer == 'uv' and not self.uv:
            self.module.fail_json(msg='sglang_installer=uv but %s is not found on the host: install uv or choose pip'
                                  % p['uv'], **self.result)
        self.result['installer'] = installer

    # ---- before an install: Python, driver, disk
    def check_python(self):
        p, result = self.p, self.result
        if not self.exists:
            base = p['base_python']
            rc, out, err = self.module.run_command([base, '-c', 'import sys; print("%d.%d.%d" % sys.version_info[:3])'])
            if rc != 0:
                self.module.fail_json(msg='sglang_python=%s does not exist and %s cannot make its venv (rc=%s): %s' % (
                    p['python'], base, rc, (err or out).strip()[:200]), **result)
            result['python_version'] = out.strip()
        if not si.python_ok(result['python_version']):
            self.module.fail_json(msg='sglang_python=%s is Python %s: SGLang needs 3.11 or newer; point sglang_python '
                                  'at a venv made with Python 3.11+' % (p['python'], result['python_version']),
                                  **result)

    def check_driver(self):
        p, result = self.p, self.result
        if not p['driver_check']:
            return
        have, error = driver(self.module)
        result['driver_version'] = have
        if error:
            self.module.fail_json(msg='no NVIDIA driver could be read (%s): SGLang %s needs driver %s or newer; '
                                  'install it, or set sglang_install_driver_check: false on a host that only '
                                  'prepares the venv' % (error, p['version'], result['min_driver']), **result)
        if not si.driver_ok(have, result['min_driver']):
            self.module.fail_json(msg='the NVIDIA driver %s is too old for SGLang %s (its wheels are built for CUDA '
                                  '%s, which needs driver %s or newer): upgrade the driver or pin an older '
                                  'sglang_version' % (have, p['version'], si.wheel_cuda(p['version']),
                                                      result['min_driver']), **result)

    def check_disk(self):
        p = self.p
        free = free_gib(self.venv)
        if free < p['min_free_gb']:
            self.module.fail_json(msg='%.1f GiB free where the venv of sglang_python=%s lies, %s needed '
                                  '(sglang_install_min_free_gb): free some space first'
                                  % (free, p['python'], p['min_free_gb']), **self.result)

    # ---- the change
    def make_venv(self):
        """``base_python -m venv`` when ``python`` does not exist (in check mode: exit, changed)."""
        p = self.p
        if self.exists:
            return
        if self.module.check_mode:
            self.result.update(changed=True, version=p['version'])
            self.module.exit_json(**self.result)
        rc, out, err = self.module.run_command([p['base_python'], '-m', 'venv', self.venv])
        if rc != 0 or not os.access(p['python'], os.X_OK):
            self.module.fail_json(msg='making the venv %s with %s failed (rc=%s): %s; sglang_python must be '
                                  '<venv>/bin/python3' % (self.venv, p['base_python'], rc, (err or out).strip()[-300:]),
                                  **self.result)
        self.created = True

    def argv(self, **kwargs):
        p = self.p
        return si.installer_argv(self.result['installer'], p['python'], self.spec, p['index_url'], p['extra_args'],
                                 isolated=p['isolated'], uv=self.uv or p['uv'], **kwargs)

    def dry_run(self):
        """Resolve the install without changing the venv; ``packages`` is what it would put in."""
        p, installer = self.p, self.result['installer']
        self.env = si.installer_env(installer, p['index_url'], p['isolated'])
        tmp = tempfile.mkdtemp(prefix='llmserve-sglang-install-')
        try:
            report = os.path.join(tmp, 'report.json')
            rc, out, err = self.module.run_command(self.argv(dry_run=True, report=report), environ_update=self.env)
            if rc != 0:
                unreachable = _unreachable(out, err, p['index_url'])
                self.fail(si.error_message(rc, out, err, self.spec, p['index_url'], unreachable=unreachable))
            text = ''
            if os.path.exists(report):
                with open(report) as handle:
                    text = handle.read()
            self.result['packages'] = si.parse_dry_run(installer, text, out + '\n' + err)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.result.update(changed=True, version=p['version'])

    def install(self):
        rc, out, err = self.module.run_command(self.argv(), environ_update=self.env)
        if rc != 0:
            self.fail(si.error_message(rc, out, err, self.spec, self.p['index_url'], dry_run=False))

    def verify(self, state):
        """import sglang gives the version, the kernel imports, the flag table reads; else fail."""
        p, result, module = self.p, self.result, self.module
        if not state.get('installed') or state.get('version') != p['version']:
            module.fail_json(msg='after the install, sglang_python=%s has sglang %s, not %s' % (
                p['python'], state.get('version'), p['version']), **result)
        if state.get('kernel_error'):
            module.fail_json(msg='sglang %s is installed but its kernel package does not load: %s (is the NVIDIA '
                             'driver library there, and new enough?)' % (p['version'], state['kernel_error']),
                             **result)
        flags = sglang_flags.read_installed(module.run_command, p['python'])
        result['version'] = p['version']
        result['option_count'] = len(flags.get('options') or [])
        if not flags.get('installed') or not result['option_count']:
            module.fail_json(msg='sglang %s is installed but its flag table does not read: %s' % (
                p['version'], flags.get('error')), **result)


def _unreachable(out, err, index_url):
    """Why the index cannot be reached, when the failed output suggests it ('' otherwise)."""
    return probe(index_url) if si.needs_probe(out, err, index_url) else ''


def run(module):
    """Do what sglang_install's options ask and exit the module with the result (fail it on any problem)."""
    work = Install(module)
    work.validate()
    work.inspect_venv()
    work.choose_installer()
    if not work.needed:
        work.verify(work.state)
        module.exit_json(**work.result)
        return
    work.check_python()
    work.check_driver()
    work.check_disk()
    work.make_venv()
    work.dry_run()
    if module.check_mode:
        module.exit_json(**work.result)
        return
    work.install()
    work.verify(inspect(module, work.p))
    module.exit_json(**work.result)


def argument_spec():
    """The sglang_install module's options (its DOCUMENTATION describes them)."""
    return dict(
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
    )
