# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""systemd as the collection talks to it: the one ``systemctl show`` parser, and systemctl calls through a module.

Private to this collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import systemd_unit


def parse_show(text):
    """``systemctl show [-p A,B] UNIT`` output -> dict of property -> value (both stripped; lines without '=' skipped)."""
    out = {}
    for line in (text or '').splitlines():
        key, sep, value = line.partition('=')
        if sep:
            out[key.strip()] = value.strip()
    return out


def show_argv(unit, properties):
    """The argv of ``systemctl show`` for these properties of unit."""
    return ['systemctl', 'show', '--property=' + ','.join(properties), unit]


class Systemctl(object):
    """systemctl through an AnsibleModule: queries never fail the module, actions do (with systemctl's own words)."""

    def __init__(self, module):
        self.module = module
        self.bin = module.get_bin_path('systemctl', required=True)

    def query(self, *args):
        rc, out, dummy = self.module.run_command([self.bin] + list(args))
        return rc, out.strip()

    def do(self, *args):
        rc, out, err = self.module.run_command([self.bin] + list(args))
        if rc != 0:
            self.module.fail_json(msg='systemctl %s failed (rc=%s): %s' % (' '.join(args), rc, (err or out).strip()),
                                  rc=rc, stdout=out, stderr=err)

    def show(self, unit, properties):
        """The unit's properties as a dict ({} when systemctl fails)."""
        rc, out = self.query('show', '--property=' + ','.join(properties), unit)
        return parse_show(out) if rc == 0 else {}

    def is_active(self, unit):
        dummy, out = self.query('is-active', unit)
        return out in ('active', 'activating', 'reloading')

    def is_enabled(self, unit):
        dummy, out = self.query('is-enabled', unit)
        return out in ('enabled', 'enabled-runtime', 'linked', 'alias')

    def version(self):
        """systemd's major version (read-only, also in check mode), or None when it cannot be read."""
        rc, out = self.query('--version')
        return systemd_unit.systemd_version(out) if rc == 0 else None

    def invocation_id(self, unit):
        rc, out = self.query('show', '--property=InvocationID', '--value', unit)
        return out if rc == 0 else ''
