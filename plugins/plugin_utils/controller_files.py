# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write text files in one directory on the controller, atomically, for the ``report_files`` action.

Pure Python (stdlib only). A file is written only when its content or mode differs; each one goes to a temporary
file in the same directory first and is renamed over the old one, so a reader never sees half a report.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.llmserve.sglang.plugins.module_utils._files import write_if_changed


def text_of(content):
    """The file's text: content as given, with a newline at the end when it lacks one."""
    content = u'' if content is None else u'%s' % (content,)
    return content if content.endswith(u'\n') else content + u'\n'


def check_name(name):
    """A plain file name inside the directory: no path separator, not '.' or '..', not empty."""
    if not name or name in ('.', '..') or '/' in name or '\0' in name:
        raise ValueError('%r is not a plain file name (no "/", not "." or "..")' % (name,))
    return name


def write_files(dest, files, mode=0o644, dir_mode=0o755, check_mode=False):
    """Write {name: content} under dest (created with dir_mode when missing).

    Returns {'changed': [names written or that would be], 'unchanged': [names], 'created_dir': bool}.
    """
    for name in files:
        check_name(name)
    out = {'changed': [], 'unchanged': [], 'created_dir': False}
    if not os.path.isdir(dest):
        out['created_dir'] = True
        if not check_mode:
            os.makedirs(dest)
            os.chmod(dest, dir_mode)
    for name in sorted(files):
        data = text_of(files[name]).encode('utf-8')
        if write_if_changed(os.path.join(dest, name), data, mode, check_mode=check_mode):
            out['changed'].append(name)
        else:
            out['unchanged'].append(name)
    return out
