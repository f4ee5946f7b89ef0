# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The work of the gpu_info module: the GPUs, their processes and the installed SGLang, read without changing anything.

``run(module)`` takes an AnsibleModule with gpu_info's options. It finds ``nvidia-smi``, asks the installed SGLang for
its flag table in a thread (importing SGLang takes seconds), reads the GPUs, the compute processes and the CUDA version
with three ``nvidia-smi`` calls meanwhile, maps the processes to Proxmox VE containers, and exits the module with the
result.

Private to this collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import threading

from ansible_collections.llmserve.sglang.plugins.module_utils import nvidia_smi as nsmi
from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_holders
from ansible_collections.llmserve.sglang.plugins.module_utils import model_download
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_flags


def argument_spec():
    """The gpu_info module's options (its DOCUMENTATION describes them)."""
    return dict(
        nvidia_smi=dict(type='str', default='nvidia-smi'),
        sglang_python=dict(type='path'),
        proxmox=dict(type='str', default='auto', choices=['auto', 'always', 'never']),
        option_help=dict(type='bool', default=True),
        compact_options=dict(type='bool', default=False),
        options_json=dict(type='bool', default=False),
    )


def find_nvidia_smi(module, name):
    """The path of ``name``: itself when absolute and executable, else looked up on PATH and the usual places."""
    if os.path.isabs(name):
        if os.access(name, os.X_OK):
            return name
        return None
    return module.get_bin_path(name, opt_dirs=['/usr/bin', '/usr/local/bin', '/usr/local/nvidia/bin'])


def missing_message(name):
    """The failure message when ``nvidia-smi`` (the option's value ``name``) is not found."""
    return ('nvidia_smi: %r was not found on this host (PATH and /usr/bin, /usr/local/bin); install the NVIDIA '
            'driver utilities, or set the nvidia_smi option to the full path of nvidia-smi' % name)


def run_nvidia_smi(module, argv):
    """The output of ``argv``; fails the module with its rc, stdout and stderr when it exits non-zero."""
    rc, out, err = module.run_command(argv)
    if rc != 0:
        module.fail_json(msg='%s failed (rc=%s): %s' % (' '.join(argv), rc, (err or out).strip()),
                         rc=rc, stdout=out, stderr=err, cmd=argv)
    return out


def start_reader(module, python, installed):
    """Start a daemon thread that fills ``installed`` with what SGLang in ``python`` reports; returns the thread.

    run_command gives each child a copy of the environment; nothing here changes os.environ.
    """
    reader = threading.Thread(target=lambda: installed.update(
        sglang_flags.read_installed(module.run_command, python)), name='sglang')
    reader.daemon = True
    reader.start()
    return reader


def read_nvidia_smi(module, binary):
    """``(gpus, apps, header, cuda_version)`` from the three nvidia-smi calls, in that order."""
    try:
        gpus = nsmi.parse_gpus(run_nvidia_smi(module, nsmi.query_gpu_argv(binary)))
        apps = nsmi.parse_apps(run_nvidia_smi(module, nsmi.query_apps_argv(binary)), gpus)
    except nsmi.NvidiaSmiParseError as exc:
        module.fail_json(msg='could not read nvidia-smi output: %s' % exc)
    rc, header, dummy = module.run_command(nsmi.header_argv(binary))
    cuda_version = nsmi.parse_cuda_version(header) if rc == 0 else None
    return gpus, apps, header, cuda_version


def map_containers(module, apps, proxmox):
    """Set each app's ``vmid`` (per the ``proxmox`` option) and return whether this host is a Proxmox VE node."""
    mapped = False
    for app in apps:
        app['vmid'] = None
        if proxmox != 'never':
            info = gpu_holders.proc_info(app['pid'])
            app['vmid'] = info['vmid'] if info else None
            mapped = mapped or app['vmid'] is not None
    if proxmox == 'never':
        return False
    if proxmox == 'always':
        return True
    return os.path.isdir('/etc/pve') or bool(module.get_bin_path('pct')) or mapped


def gpu_result(gpus, apps, header, cuda_version, proxmox_node):
    """The module's result without ``sglang``."""
    summary = nsmi.summarize(gpus)
    driver = gpus[0].get('driver_version') if gpus else nsmi.parse_driver_version(header)
    return dict(
        changed=False,
        gpus=gpus,
        gpu_count=summary['gpu_count'],
        gpu_name=summary['gpu_name'],
        compute_cap=summary['compute_cap'],
        arch=summary['arch'],
        mixed=summary['mixed'],
        driver_version=driver,
        cuda_version=cuda_version,
        processes=apps,
        proxmox_node=proxmox_node,
        container=gpu_holders.in_container(),
    )


def sglang_result(module, params, reader, installed):
    """The ``sglang`` entry: waits for ``reader`` (or asks SGLang now), then trims the options as the params say."""
    python = params['sglang_python']
    if python and not os.access(python, os.X_OK):
        return dict(installed=False, version=None, python=python, python_version=None, source=None, options=[],
                    error='%s does not exist or is not executable' % python)
    if not python:
        return dict(installed=None, version=None, python=None, python_version=None, source=None,
                    options=[], error='sglang_python not given')
    if reader is not None:
        reader.join()
    else:   # became executable meanwhile
        installed = sglang_flags.read_installed(module.run_command, python)
    if params['compact_options']:
        installed['options'] = sglang_flags.compact_options(installed.get('options') or [])
    elif not params['option_help']:
        for option in installed.get('options') or []:
            option['help'] = None
    return installed


def hf_found(python):
    """Whether the ``hf`` command is beside ``python`` (SGLang's venv, where sglang_model_download runs it); None
    without ``python``."""
    if not python:
        return None
    return os.path.lexists(model_download.hf_program(python))


def add_option_count(sglang, options_json):
    """Add ``option_count`` to ``sglang``; with ``options_json``, move the options into one JSON text."""
    sglang['option_count'] = len(sglang['options'])
    if options_json:
        sglang['options_json'] = json.dumps(sglang['options'], separators=(',', ':'))
        sglang['options'] = []


def run(module):
    """Read everything and exit ``module`` with the result (fails it when nvidia-smi is missing or fails)."""
    params = module.params
    binary = find_nvidia_smi(module, params['nvidia_smi'])
    if not binary:
        module.fail_json(msg=missing_message(params['nvidia_smi']))

    # Importing SGLang takes seconds on a real host (torch): ask it in a thread while nvidia-smi runs.
    installed = {}
    reader = None
    if params['sglang_python'] and os.access(params['sglang_python'], os.X_OK):
        reader = start_reader(module, params['sglang_python'], installed)

    gpus, apps, header, cuda_version = read_nvidia_smi(module, binary)
    proxmox_node = map_containers(module, apps, params['proxmox'])
    result = gpu_result(gpus, apps, header, cuda_version, proxmox_node)
    result['sglang'] = sglang_result(module, params, reader, installed)
    add_option_count(result['sglang'], params['options_json'])
    result['sglang']['hf_found'] = hf_found(params['sglang_python'])
    module.exit_json(**result)
