# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia-smi: argv builders for the query forms and parsers for their output.

Pure functions, stdlib only. The formats are those of a real H200 with driver 580
(see tests/data/nvidia-smi-h200/): CSV with ``, `` separators, optional header line
(``memory.used [MiB]``), optional units (``21265 MiB``), ``[N/A]`` / ``N/A`` /
``[Not Supported]`` for values a GPU does not report.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# field names as nvidia-smi takes them -> key in the returned dict, converter
GPU_FIELDS = (
    ('index', 'index', 'int'),
    ('name', 'name', 'str'),
    ('uuid', 'uuid', 'str'),
    ('pci.bus_id', 'bus_id', 'str'),
    ('compute_cap', 'compute_cap', 'str'),
    ('driver_version', 'driver_version', 'str'),
    ('memory.used', 'memory_used_mib', 'int'),
    ('memory.total', 'memory_total_mib', 'int'),
    ('power.draw', 'power_draw_w', 'float'),
    ('power.limit', 'power_limit_w', 'float'),
    ('utilization.gpu', 'utilization_pct', 'int'),
)

MEMORY_FIELDS = (
    ('index', 'index', 'int'),
    ('uuid', 'uuid', 'str'),
    ('memory.used', 'memory_used_mib', 'int'),
    ('memory.total', 'memory_total_mib', 'int'),
)

APP_FIELDS = (
    ('pid', 'pid', 'int'),
    ('process_name', 'name', 'str'),
    ('used_memory', 'used_mib', 'int'),
    ('gpu_uuid', 'gpu_uuid', 'str'),
    ('gpu_bus_id', 'gpu_bus_id', 'str'),
)

_MISSING = ('', 'n/a', '[n/a]', '[not supported]', 'not supported', '[unknown error]',
            '[insufficient permissions]', '[gpu is lost]', '[requested functionality has been deprecated]')
_UNIT_RE = re.compile(r'^\s*([-+]?[0-9]*\.?[0-9]+)\s*(MiB|W|%|MHz|C)?\s*$')
_CUDA_RE = re.compile(r'CUDA Version\s*:\s*([0-9]+(?:\.[0-9]+)*)')
_DRIVER_RE = re.compile(r'Driver Version\s*:\s*([0-9]+(?:\.[0-9]+)*)')
_CUDA_XML_RE = re.compile(r'<cuda_version>\s*([^<\s]+)\s*</cuda_version>')


class NvidiaSmiParseError(ValueError):
    """Output that does not look like what was asked for."""


def query_gpu_argv(nvidia_smi='nvidia-smi', fields=GPU_FIELDS):
    """argv for the one --query-gpu call (no header, no units)."""
    return [nvidia_smi, '--query-gpu=' + ','.join(f[0] for f in fields), '--format=csv,noheader,nounits']


def query_apps_argv(nvidia_smi='nvidia-smi', fields=APP_FIELDS):
    """argv for the one --query-compute-apps call (no header, no units)."""
    return [nvidia_smi, '--query-compute-apps=' + ','.join(f[0] for f in fields), '--format=csv,noheader,nounits']


def header_argv(nvidia_smi='nvidia-smi'):
    """argv of the plain table, whose header carries ``CUDA Version: 13.0``."""
    return [nvidia_smi]


def gpu_reset_argv(index, nvidia_smi='nvidia-smi'):
    return [nvidia_smi, '--gpu-reset', '-i', str(int(index))]


def convert(value, kind):
    """Convert one CSV cell; missing markers -> None; units (MiB, W, %) stripped."""
    if value is None:
        return None
    text = value.strip()
    if text.lower() in _MISSING:
        return None
    if kind == 'str':
        return text
    match = _UNIT_RE.match(text)
    if not match:
        return None
    number = match.group(1)
    if kind == 'int':
        try:
            return int(number)
        except ValueError:
            return int(round(float(number)))
    return float(number)


def _split_csv_line(line):
    # nvidia-smi separates with ", " and does not quote; GPU and process names have no commas
    # in practice, but a process name could: keep the field count by joining the middle.
    return [cell.strip() for cell in line.split(',')]


def parse_csv(text, fields):
    """Parse ``--format=csv[,noheader][,nounits]`` output into a list of dicts.

    ``fields`` is a sequence of (nvidia-smi name, key, kind). A header line is detected
    (its first cell equals the first field's name) and skipped. Raises NvidiaSmiParseError
    when a row does not have the expected number of cells.
    """
    rows = []
    want = len(fields)
    first_name = fields[0][0]
    for raw in (text or '').splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.lower().startswith('no devices') or line.startswith('No running'):
            continue
        cells = _split_csv_line(line)
        if cells and cells[0].split(' [')[0] == first_name:
            continue  # header
        if len(cells) > want:
            # a name with a comma in it: the name field absorbs the excess
            name_pos = [i for i, f in enumerate(fields) if f[2] == 'str' and f[1] in ('name',)]
            if not name_pos:
                raise NvidiaSmiParseError('expected %d fields, got %d: %r' % (want, len(cells), raw))
            pos = name_pos[0]
            extra = len(cells) - want
            cells = cells[:pos] + [', '.join(cells[pos:pos + extra + 1])] + cells[pos + extra + 1:]
        if len(cells) != want:
            raise NvidiaSmiParseError('expected %d fields, got %d: %r' % (want, len(cells), raw))
        row = {}
        for (dummy, key, kind), cell in zip(fields, cells):
            row[key] = convert(cell, kind)
        rows.append(row)
    return rows


def arch_family(compute_cap):
    """``"9.0" -> "sm90"``, ``"10.0" -> "sm100"``, ``"10.3" -> "sm100"``, ``"12.0" -> "sm120"``, ``"8.6" -> "sm86"``.

    From Hopper on, the family is the major version (sm90, sm100, sm120); before, the full
    capability (sm80, sm86, sm89). None for an unreadable value.
    """
    if compute_cap is None:
        return None
    text = str(compute_cap).strip()
    match = re.match(r'^(?:sm_?)?([0-9]+)(?:\.([0-9]+))?$', text, re.IGNORECASE)
    if not match:
        return None
    major = int(match.group(1))
    minor = int(match.group(2) or 0)
    if match.group(2) is None and major >= 20:
        # already a family number like "sm120" / "120"
        return 'sm%d' % major
    if major >= 9:
        return 'sm%d0' % major
    return 'sm%d%d' % (major, minor)


def parse_gpus(text):
    """Rows of the GPU query, sorted by index, with ``arch`` added."""
    gpus = parse_csv(text, GPU_FIELDS)
    for gpu in gpus:
        gpu['arch'] = arch_family(gpu.get('compute_cap'))
    gpus.sort(key=lambda g: (g.get('index') is None, g.get('index')))
    return gpus


def parse_apps(text, gpus=None):
    """Rows of the compute-apps query; ``gpu_index`` resolved through ``gpus`` (uuid, then bus id)."""
    apps = parse_csv(text, APP_FIELDS)
    by_uuid = {}
    by_bus = {}
    for gpu in gpus or []:
        if gpu.get('uuid'):
            by_uuid[gpu['uuid']] = gpu.get('index')
        if gpu.get('bus_id'):
            by_bus[normalize_bus_id(gpu['bus_id'])] = gpu.get('index')
    for app in apps:
        index = by_uuid.get(app.get('gpu_uuid'))
        if index is None and app.get('gpu_bus_id'):
            index = by_bus.get(normalize_bus_id(app['gpu_bus_id']))
        app['gpu_index'] = index
    return apps


def normalize_bus_id(bus_id):
    """``00000000:00:06.0`` and ``0000:00:06.0`` compare equal."""
    text = (bus_id or '').strip().lower()
    parts = text.split(':')
    if len(parts) == 3 and re.match(r'^[0-9a-f]+$', parts[0]):
        return '%08x:%s:%s' % (int(parts[0], 16), parts[1], parts[2])
    return text


def parse_cuda_version(text):
    """CUDA version from the plain table header, ``-q`` or ``-q -x`` output; None when absent."""
    if not text:
        return None
    match = _CUDA_RE.search(text) or _CUDA_XML_RE.search(text)
    if not match:
        return None
    value = match.group(1)
    return None if value.lower() in _MISSING else value


def parse_driver_version(text):
    match = _DRIVER_RE.search(text or '')
    return match.group(1) if match else None


def summarize(gpus):
    """The scalar facts a playbook branches on: count, first GPU's name/cap/arch, mixed flag."""
    names = sorted(set(g.get('name') for g in gpus if g.get('name')))
    caps = sorted(set(g.get('compute_cap') for g in gpus if g.get('compute_cap')))
    first = gpus[0] if gpus else {}
    return {
        'gpu_count': len(gpus),
        'gpu_name': first.get('name'),
        'compute_cap': first.get('compute_cap'),
        'arch': first.get('arch'),
        'mixed': len(names) > 1 or len(caps) > 1,
    }


def memory_by_index(gpus):
    """[{index, used_mib, total_mib}] from parsed GPU rows (either query form)."""
    out = []
    for gpu in gpus:
        out.append({'index': gpu.get('index'), 'used_mib': gpu.get('memory_used_mib'),
                    'total_mib': gpu.get('memory_total_mib')})
    return out
