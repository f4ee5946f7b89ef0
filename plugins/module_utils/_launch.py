# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The work of the sglang_launch module: validate -> render -> plan -> apply -> result.

``run(module)`` takes an AnsibleModule with sglang_launch's options. It validates every option before any change,
renders the unit and the 0600 EnvironmentFile, writes what differs (atomically, with timestamped backups), runs
``daemon-reload`` when the unit changed, then starts, stops or restarts the service (with ``free_gpus``: stop, free
the GPUs, start), and exits the module with the result. ``state=absent`` stops, disables and removes instead.

Private to this collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import os

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmserve.sglang.plugins.module_utils import _files
from ansible_collections.llmserve.sglang.plugins.module_utils import _specs
from ansible_collections.llmserve.sglang.plugins.module_utils import _systemd
from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_free
from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_holders
from ansible_collections.llmserve.sglang.plugins.module_utils import redact
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_flags
from ansible_collections.llmserve.sglang.plugins.module_utils import systemd_unit

UNIT_MODE = 0o644
ENV_MODE = 0o600
UNIT_DIR_MODE = 0o755
ENV_DIR_MODE = 0o700


def errors_message(errors):
    """The failure message of a validation that found ``errors``."""
    return 'sglang_launch: %d problem%s, nothing changed: %s' % (len(errors), '' if len(errors) == 1 else 's',
                                                                 '; '.join(errors))


def fail_errors(module, errors, **kwargs):
    """Fail the module with every problem found, their kinds, and ``kwargs`` (the result so far)."""
    module.fail_json(msg=errors_message(errors), errors=errors, error_kinds=sglang_flags.error_kinds(errors), **kwargs)


def renders(state, model_path):
    """Whether the unit and env file are rendered: not for ``absent`` (remove only), nor ``stopped`` without a model."""
    return state != 'absent' and (state != 'stopped' or model_path is not None)


def option_errors(params, restart):
    """The problems of the options checked before the flags: ``restart`` (normalized), bounds, ``free_gpus``."""
    errors = []
    if restart not in systemd_unit.RESTART_CHOICES:
        errors.append('restart: %r is not one of %s' % (restart, ', '.join(systemd_unit.RESTART_CHOICES)))
    if params['backup_keep'] < 1:
        errors.append('backup_keep: must be 1 or more')
    if params['restart_sec'] < 0:
        errors.append('restart_sec: must be 0 or more (seconds before a restart)')
    if params['timeout_stop_sec'] < 1:
        errors.append('timeout_stop_sec: must be 1 or more (a stop must be bounded)')
    free = params['free_gpus']
    bounds = gpu_free.bounds_error(free) if free is not None else None
    if bounds:
        errors.append('free_gpus: %s' % bounds)
    return errors


def removal_actions(active, enabled):
    """The systemctl actions of ``state=absent`` when the unit or env file exists."""
    return (['stop'] if active else []) + (['disable'] if enabled else []) + ['daemon-reload']


def service_actions(state, active, restart_due, enable=None, free_gpus=False):
    """The systemctl actions after the files are written (``daemon-reload`` not included).

    ``enable``: True/False when the enablement must change, else None. ``restart_due``: a running service of
    ``state=started`` must restart (its env file changed, or its unit beyond ``Restart=``/``RestartSec=``). With
    ``free_gpus`` a start or restart becomes ``stop``, ``free-gpus``, ``start``. Pure.
    """
    actions = []
    if enable is not None:
        actions.append('enable' if enable else 'disable')
    if state == 'started':
        if not active:
            actions.append('start')
        elif restart_due:
            actions.append('restart')  # a change of Restart=/RestartSec= only: the daemon-reload applies it
    elif state == 'restarted':
        actions.append('restart')
    elif state == 'stopped' and active:
        actions.append('stop')
    if free_gpus and ('start' in actions or 'restart' in actions):
        actions = [a for a in actions if a not in ('start', 'restart')] + ['stop', 'free-gpus', 'start']
    return actions


def masked_env_diff(env_before, params, rendered):
    """The env file's before and after for the diff, secrets masked ('' for a file that is not there)."""
    before = after = ''
    if env_before is not None:
        before = systemd_unit.render_env_file(systemd_unit.parse_env_file(env_before), mask=True)
    if rendered:
        after = systemd_unit.render_env_file(params['env'], api_key=params['api_key'], mask=True)
    return before, after


class Launch(object):
    """One run of sglang_launch on an AnsibleModule: the steps in the order :func:`run` calls them."""

    def __init__(self, module):
        self.module = module
        self.p = p = module.params
        self.unit_name = '%s.service' % p['service_name']
        self.unit_path = os.path.join(p['unit_dir'], self.unit_name)
        self.env_path = os.path.join(p['env_dir'], '%s.env' % p['service_name'])
        self.backup_dir = p['backup_dir'] or os.path.join(p['env_dir'], 'backup')
        self.render = renders(p['state'], p['model_path'])
        self.free = p['free_gpus']
        self.restart = None
        self.unit_before = self.env_before = self.unit_after = self.env_after = None
        self.systemctl = None
        self.stamp = datetime.datetime.now().strftime('%Y%m%dT%H%M%S.%f')  # of every backup this run makes
        self.result = dict(changed=False, unit_path=self.unit_path, env_path=self.env_path, backup_files=[],
                           unit_changed=False, env_changed=False, daemon_reloaded=False, actions=[], arch_findings=[],
                           validation_warnings=[], sglang_version=p['sglang_version'])

    # ---- validate: everything before any change
    def validate(self):
        name_error = systemd_unit.validate_service_name(self.p['service_name'])
        if name_error:
            fail_errors(self.module, [name_error], **self.result)
        self.restart = systemd_unit.normalize_restart(self.p['restart'])
        errors = option_errors(self.p, self.restart)
        if self.render:
            errors.extend(self.flag_errors())
        if errors:
            fail_errors(self.module, errors, **self.result)

    def flag_table(self, errors):
        """The installed SGLang's flag table: from ``sglang_options``, else read from ``python``; None without one."""
        p = self.p
        options, options_error = sglang_flags.load_options(p['sglang_options'])
        if options_error:
            errors.append('sglang_options: %s' % options_error)
            return None
        if options:
            return sglang_flags.FlagTable(options, p['sglang_version'])
        installed = sglang_flags.read_installed(self.module.run_command, p['python'])
        if not installed['options']:
            errors.append('sglang_options: could not read the flags of the installed SGLang from %s (%s); '
                          'pass sglang_options from gpu_info, fix python, or set check_flags=false'
                          % (p['python'], installed['error']))
            return None
        self.result['sglang_version'] = installed['version']
        return sglang_flags.FlagTable(installed['options'], installed['version'])

    def flag_errors(self):
        """The problems of env, the flags and the backends (warnings go to the module and the result)."""
        p = self.p
        errors = systemd_unit.validate_env(p['env'], reserved=(sglang_flags.API_KEY_ENV,))
        table = None
        python_ok = bool(p['python']) and p['python'].startswith('/')  # else sglang_flags.validate names it
        if p['check_flags'] and python_ok:
            table = self.flag_table(errors)
        checked = sglang_flags.validate(p, table, arch=p['gpu_arch'], gpu_count=p['gpu_count'], force=p['force'],
                                        check_flags=p['check_flags'])
        errors.extend(checked['errors'])
        for warning in checked['warnings']:
            self.module.warn(warning)
        self.result['validation_warnings'] = checked['warnings']
        self.result['arch_findings'] = checked['arch_findings']
        return errors

    # ---- render and compare
    def render_files(self):
        p, result = self.p, self.result
        self.unit_before = _files.read_text(self.unit_path)
        self.env_before = _files.read_text(self.env_path)
        self.systemctl = _systemd.Systemctl(self.module)
        if not self.render:
            result['unit_changed'] = p['state'] == 'absent' and self.unit_before is not None
            result['env_changed'] = p['state'] == 'absent' and self.env_before is not None
            return
        argv = sglang_flags.build_argv(p)
        result['log_filter_patterns'] = systemd_unit.log_filter_patterns(self.systemctl.version(), bool(p['api_key']))
        try:
            self.unit_after = systemd_unit.render_unit(
                argv, p['service_name'], self.env_path, description=p['description'], restart=self.restart,
                restart_sec=p['restart_sec'], timeout_stop_sec=p['timeout_stop_sec'], limit_nofile=p['limit_nofile'],
                working_directory=p['working_directory'], user=p['user'],
                log_filter_patterns=result['log_filter_patterns'])
            self.env_after = systemd_unit.render_env_file(p['env'], api_key=p['api_key'])
        except systemd_unit.UnitError as exc:
            fail_errors(self.module, ['extra_args/model_path: %s' % to_native(exc)], **result)
        result['argv'] = sglang_flags.display_argv(argv)
        result['exec_start'] = systemd_unit.render_exec_start(argv)
        result['unit_changed'] = self.unit_before != self.unit_after
        result['env_changed'] = self.env_before != self.env_after

    def add_diff(self):
        """The before/after of the unit and the env file (masked), in diff mode."""
        if not self.module._diff:
            return
        env_before, env_after = masked_env_diff(self.env_before, self.p, self.env_after is not None)
        self.result['diff'] = [
            dict(before_header=self.unit_path, after_header=self.unit_path, before=self.unit_before or '',
                 after=self.unit_after or ''),
            dict(before_header=self.env_path, after_header=self.env_path, before=env_before, after=env_after),
        ]

    # ---- apply: files, backups, systemctl
    def backup_of(self, path):
        if self.p['backup'] and not self.module.check_mode:
            made = _files.backup(path, self.backup_dir, self.p['backup_keep'], self.stamp, module=self.module)
            if made:
                self.result['backup_files'].append(made)

    def remove(self):
        """state=absent: stop and disable the unit, remove both files (backups first), daemon-reload; exit."""
        result, systemctl = self.result, self.systemctl
        actions = result['actions']
        if self.unit_before is not None or self.env_before is not None:
            actions.extend(removal_actions(systemctl.is_active(self.unit_name), systemctl.is_enabled(self.unit_name)))
        if not self.module.check_mode:
            for action in actions:
                if action != 'daemon-reload':
                    systemctl.do(action, self.unit_name)
            for path, before in ((self.unit_path, self.unit_before), (self.env_path, self.env_before)):
                if before is not None:
                    self.backup_of(path)
                    os.unlink(path)
            if 'daemon-reload' in actions:
                systemctl.do('daemon-reload')
                result['daemon_reloaded'] = True
        result['changed'] = bool(actions)
        self.module.exit_json(**result)

    def write_files(self):
        """Write the env file, then the unit (backups first) where they changed; daemon-reload after a new unit."""
        result = self.result
        if not self.module.check_mode:
            if result['env_changed']:
                self.write(self.p['env_dir'], ENV_DIR_MODE, self.env_path, self.env_after, ENV_MODE)
            if result['unit_changed']:
                self.write(self.p['unit_dir'], UNIT_DIR_MODE, self.unit_path, self.unit_after, UNIT_MODE)
        if result['unit_changed']:
            result['actions'].append('daemon-reload')
            if not self.module.check_mode:
                self.systemctl.do('daemon-reload')
                result['daemon_reloaded'] = True

    def write(self, directory, directory_mode, path, text, mode):
        if not os.path.isdir(directory):
            os.makedirs(directory, directory_mode)
        self.backup_of(path)
        _files.atomic_write(path, text, mode, module=self.module)

    def plan(self):
        """Add the enable/disable and the start/restart/stop this run needs to the actions."""
        p, systemctl = self.p, self.systemctl
        enable = None
        if p['enabled'] is not None and p['enabled'] != systemctl.is_enabled(self.unit_name):
            enable = p['enabled']
        active = systemctl.is_active(self.unit_name)
        restart_due = p['state'] == 'started' and active and (
            self.result['env_changed'] or systemd_unit.unit_change(self.unit_before, self.unit_after) == 'restart')
        self.result['actions'].extend(service_actions(p['state'], active, restart_due, enable=enable,
                                                      free_gpus=self.free is not None))

    def apply(self):
        """Run the planned actions (daemon-reload already ran); with free_gpus the stop is bounded."""
        if self.module.check_mode:
            return
        for action in self.result['actions']:
            if action == 'daemon-reload':
                continue
            if self.free is not None and action == 'stop':
                self.stop_unit()
            elif action == 'free-gpus':
                self.free_gpus()
            else:
                self.systemctl.do(action, self.unit_name)

    def stop_unit(self):
        try:
            self.result['unit_stop'] = gpu_holders.stop_unit(self.module.run_command, self.unit_name,
                                                             self.free['stop_timeout'], kill=self.free.get('kill_unit'))
        except RuntimeError as exc:
            self.module.fail_json(msg='free_gpus: %s' % exc, **self.result)

    def free_gpus(self):
        module = self.module
        try:
            ok, freed, msg = gpu_free.free(module.run_command,
                                           lambda binary, dirs: module.get_bin_path(binary, opt_dirs=dirs),
                                           self.free, warn=module.warn, own_unit=self.unit_name)
        except gpu_free.FreeError as exc:
            module.fail_json(msg='free_gpus: %s' % exc.msg, **self.result)
        self.result['gpus_freed'] = freed
        if not ok:
            self.result['changed'] = True
            module.fail_json(msg='free_gpus: the unit is stopped and not started: %s' % msg, **self.result)

    # ---- result
    def finish(self):
        result = self.result
        result['invocation_id'] = '' if self.module.check_mode else self.systemctl.invocation_id(self.unit_name)
        files_changed = result['unit_changed'] or result['env_changed']
        result['changed'] = files_changed or bool([a for a in result['actions'] if a != 'daemon-reload'])
        self.module.exit_json(**result)


def run(module):
    """Do what sglang_launch's options ask and exit the module with the result (fail it on any problem)."""
    redact.guard(module)
    launch = Launch(module)
    launch.validate()
    launch.render_files()
    launch.add_diff()
    if module.params['state'] == 'absent':
        launch.remove()
        return
    launch.write_files()
    launch.plan()
    launch.apply()
    launch.finish()


def argument_spec():
    """The sglang_launch module's options (its DOCUMENTATION describes them)."""
    return dict(
        redact.argument_spec(),
        service_name=dict(type='str', required=True),
        state=dict(type='str', default='started', choices=['started', 'stopped', 'restarted', 'present', 'absent']),
        enabled=dict(type='bool'),
        python=dict(type='path'),
        model_path=dict(type='str'),
        served_model_name=dict(type='str'),
        tp_size=dict(type='int'),
        nnodes=dict(type='int'),
        node_rank=dict(type='int'),
        dist_init_addr=dict(type='str'),
        quantization=dict(type='str'),
        moe_runner_backend=dict(type='str'),
        fp4_gemm_backend=dict(type='str'),
        attention_backend=dict(type='str'),
        tool_call_parser=dict(type='str'),
        reasoning_parser=dict(type='str'),
        host=dict(type='str'),
        port=dict(type='int'),
        api_key=dict(type='str', no_log=True),
        env=dict(type='dict', default={}),
        extra_args=dict(type='list', elements='str', default=[]),
        disable_custom_all_reduce=dict(type='bool', default=False),
        gpu_arch=dict(type='str'),
        gpu_count=dict(type='int'),
        sglang_options=dict(type='raw'),
        sglang_version=dict(type='str'),
        check_flags=dict(type='bool', default=True),
        force=dict(type='bool', default=False),
        unit_dir=dict(type='path', default='/etc/systemd/system'),
        env_dir=dict(type='path', default='/etc/llmserve'),
        backup=dict(type='bool', default=True),
        backup_dir=dict(type='path'),
        backup_keep=dict(type='int', default=5),
        description=dict(type='str'),
        restart=dict(type='raw', default='no'),
        restart_sec=dict(type='int', default=10),
        timeout_stop_sec=dict(type='int', default=30),
        limit_nofile=dict(type='int', default=1048576),
        working_directory=dict(type='path', default='/'),
        user=dict(type='str'),
        free_gpus=dict(type='dict', options=_specs.gpu_free_argument_spec()),
    )
