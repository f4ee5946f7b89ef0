# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a host serves now: the unit, its arguments, its health, its GPU memory and the record, in one summary.

Pure functions over what the ``sglang_status`` module read (``systemctl show``, the unit file, the env file, the
record, nvidia-smi's compute apps, the unit's cgroup, one HTTP reply); tested with plain data.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import _systemd
from ansible_collections.llmserve.sglang.plugins.module_utils import redact
from ansible_collections.llmserve.sglang.plugins.module_utils import systemd_unit

SHOW_PROPERTIES = ('LoadState', 'ActiveState', 'SubState', 'UnitFileState', 'MainPID', 'InvocationID',
                   'ExecMainStartTimestamp', 'NRestarts', 'Result', 'ControlGroup', 'FragmentPath')
RECORD_LAST = 5


def show_argv(service_name):
    return _systemd.show_argv('%s.service' % service_name, SHOW_PROPERTIES)


def unit_argv(unit_text, values=()):
    """The ExecStart argv of the unit file as systemd would split it (``${VAR}`` left as written), redacted."""
    if not unit_text:
        return []
    value = systemd_unit.read_unit_value(unit_text, 'ExecStart')
    if not value:
        return []
    value = value.replace('\\\n', ' ')  # systemd reads a backslash before a newline as a space
    try:
        words = systemd_unit.split_words(value)
    except ValueError:
        return [redact.redact_text(value, values)]
    return redact.redact_argv(words, values)


def _flag_value(argv, flag):
    value = None
    for index, item in enumerate(argv):
        if item == flag and index + 1 < len(argv):
            value = argv[index + 1]
        elif item.startswith(flag + '='):
            value = item.partition('=')[2]
    return value


def health(reply):
    """``{'status': 'ready' | 'unhealthy' | 'unauthorized' | 'down', 'http_status', 'seconds', 'error'}``."""
    if reply is None:
        return {'status': 'down', 'http_status': None, 'seconds': None, 'error': 'not asked (the unit is not active)'}
    status, error = reply.get('status'), reply.get('error')
    if status == 200:
        verdict = 'ready'
    elif status in (401, 403):
        verdict = 'unauthorized'
    elif status is None:
        verdict = 'down'
    else:
        verdict = 'unhealthy'
    return {'status': verdict, 'http_status': status, 'seconds': reply.get('seconds'), 'error': error}


def gpu_processes(apps, cgroup_pids, main_pid):
    """nvidia-smi's compute apps, each marked whether it belongs to the service (its cgroup or its main PID)."""
    mine = set(cgroup_pids or [])
    if main_pid:
        mine.add(main_pid)
    out = []
    for app in apps or []:
        out.append({'pid': app.get('pid'), 'name': app.get('name'), 'gpu': app.get('gpu_index'),
                    'used_mib': app.get('used_mib'), 'service': app.get('pid') in mine})
    return out


def record_summary(record, last=RECORD_LAST):
    record = record if isinstance(record, dict) else {}
    entries = [e for e in record.get('entries') or [] if isinstance(e, dict)]
    keep = ('time', 'name', 'outcome', 'reason', 'evidence', 'sglang_version', 'seconds')
    return {'selected': record.get('selected'),
            'entries': len(entries),
            'last': [dict((k, e.get(k)) for k in keep) for e in entries[-last:]]}


def summarize(show, unit_text, env_text, record, apps, cgroup_pids, reply, values=()):
    """The ``sglang_status`` result (without ``changed``)."""
    show = dict(show or {})
    try:
        main_pid = int(show.get('MainPID') or 0)
    except ValueError:
        main_pid = 0
    argv = unit_argv(unit_text, values)
    env_names = sorted(systemd_unit.parse_env_file(env_text)) if env_text is not None else []
    rec = record_summary(record)
    selected = (rec['selected'] or {}).get('name')
    backends = dict((flag, _flag_value(argv, flag)) for flag in
                    ('--moe-runner-backend', '--fp4-gemm-backend', '--attention-backend', '--quantization',
                     '--tp-size'))
    apps_out = gpu_processes(apps, cgroup_pids, main_pid)
    state = show.get('ActiveState') or 'unknown'
    served = health(reply)
    if show.get('LoadState') == 'not-found':
        summary = 'not deployed'
    elif state == 'active' and served['status'] == 'ready':
        summary = 'serving'
    elif state == 'active':
        summary = 'active, health %s' % served['status']
    else:
        summary = state
    return {
        'summary': summary,
        # a unit that runs a server which does not answer (heal.yml restarts it); a wrong key is no reason
        'needs_restart': state == 'active' and served['status'] in ('down', 'unhealthy'),
        'unit': dict((k, show.get(k)) for k in SHOW_PROPERTIES),
        'main_pid': main_pid,
        'argv': argv,
        'backends': dict((k, v) for k, v in backends.items() if v is not None),
        'env_names': env_names,
        'health': served,
        'gpu_processes': apps_out,
        'gpu_memory_mib': sum(a.get('used_mib') or 0 for a in apps_out if a['service']),
        'selected': selected,
        'record': redact.redact(rec, values),
    }
