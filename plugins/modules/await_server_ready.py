#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: await_server_ready
short_description: Wait for an SGLang server to be ready, or classify why it failed
version_added: 0.1.0
description:
  - Watches, together, the server's log (the journal of a systemd unit, or a plain log file), its process
    (the unit's main process, or a given PID) and C(GET /health_generate).
  - Returns C(ready) as soon as the ready line C(The server is fired up and ready to roll!) was logged and the health
    endpoint answered 200. A multi-node rank other than 0 never logs that line; its ready line is
    C(Dummy health check server started in background thread at HOST:PORT) (SGLang 0.5.23; the line of older
    releases is known too), and its dummy health endpoint answers 200.
  - Returns a failure status as soon as the process dies or a fatal line appears, within about one second of the event,
    with the most telling line of the traceback as evidence.
  - Looks at the watched process's ranks in /proc every 0.1 s, the processes titled C(sglang::scheduler*) and
    C(sglang::detokenizer*). One that dies while the main process lives ends the wait about 0.2 s later (the log
    lines of that moment are part of the evidence), as SGLang's own line about it would, which comes up to a second
    later - C(killed) for SIGKILL or SIGTERM (C(oom) when systemd marks the unit C(Result=oom-kill)), else
    C(crashed). Other children (compile workers) may come and go; the ranks that a stop of the unit ends are no
    rank's death.
  - With O(step), returns C(loading) after at most O(step) seconds with the latest start-up milestone, so that a role can
    call it again (passing back O(cursor)) and print progress.
  - For a systemd unit only the lines of the unit's current invocation are read (journal field C(_SYSTEMD_INVOCATION_ID)),
    so lines of earlier runs never confuse the classification.
  - Changes nothing on the host.
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.platform
  - llmserve.sglang.redact
  - llmserve.sglang.endpoint
  - llmserve.sglang.endpoint.tls
options:
  service_name:
    description:
      - The systemd unit that runs the server (with or without the C(.service) suffix).
      - Its journal is the log and its main process is the process, unless O(log_path) or O(pid) is given.
      - One of O(service_name) and O(log_path) is required.
    type: str
  log_path:
    description:
      - A plain log file the server writes to, read instead of the journal.
    type: path
  pid:
    description:
      - The server's process ID, watched when there is no O(service_name).
      - Without O(pid) and O(service_name), only the log and the health endpoint are watched.
    type: int
  health_path:
    description: The health endpoint; C(/health_generate) proves a token can be generated.
    type: str
    default: /health_generate
  health_request_timeout:
    description: Seconds one health request may take (SGLang itself answers 503 after 20 s without a token).
    type: float
    default: 25
  require_ready_line:
    description:
      - Wait for the ready line before probing health.
      - Set to V(false) when the log cannot be read; then the first 200 from the health endpoint means ready.
    type: bool
    default: true
  timeout:
    description:
      - Overall bound in seconds, counted from the start of the server (the unit's start, the process's start,
        or O(start_time)); past it the status is C(timeout).
      - With O(require_ready_line=false) (a check of a server that already runs), counted from this call.
    type: float
    default: 1800
  hang_timeout:
    description:
      - Seconds without a new log line, while the process is alive and not ready, and idle, after which the status
        is C(hang).
      - Idle means that the unit's processes used less than 5 % of a CPU core, read less than 1 MiB, and their threads
        waited less than half a second on a run queue, in each of three one-second samples in a row (its cgroup's
        C(cpu.stat), C(io.stat) and its processes' C(/proc/PID/task/TID/schedstat), else the main process's tree in
        /proc). A silent load that works (a tqdm bar with no newline, a JIT compile, imports) is never a hang, nor is
        a load starved of CPU by other work on its host.
    type: float
    default: 600
  unhealthy_timeout:
    description:
      - Seconds after the ready line within which the health endpoint must answer 200, else C(unhealthy).
      - With O(require_ready_line=false), counted from the ready line or this call, whichever is later.
    type: float
    default: 60
  step:
    description:
      - When greater than 0, return C(loading) after at most this many seconds if nothing was decided yet.
      - Call the module again with the returned O(cursor) to continue.
    type: float
    default: 0
  progress:
    description:
      - When greater than 0, the task waits until a decision, however long the load, and prints a progress line
        (the last milestone and the seconds since the server started) on the controller every O(progress) seconds.
      - The action plugin calls the module again with its RV(cursor) until the status is no longer C(loading). Each
        call waits up to O(step) seconds (default 60; a group's members O(progress) seconds), and returns sooner
        when the milestone changed and the call is at least O(progress) seconds old, so that the lines show it.
    type: float
    default: 0
  progress_label:
    description:
      - What the progress lines name, for example the candidate; default O(service_name).
    type: str
  group:
    description:
      - With O(progress), the serving group this host belongs to (as the P(llmserve.sglang.preflight#role) role
        describes it - C(name), C(head), C(members) with C(host) and C(rank)).
      - The members that wait at the same time share their latest status on the controller, so that a member still
        loading stops as soon as another rank has failed, and a ready member is watched until the group is ready.
    type: dict
  cursor:
    description:
      - The RV(cursor) returned by the previous call, to continue it.
      - Each call reads this run's log again from its start (the journal of the unit's current invocation, or the
        file from O(since)), which is cheap, so the state (milestone, ready line, traceback, hang clock from the lines'
        time stamps) is complete; the wait then goes on from the end.
      - For a journal it is a journal cursor; for a log file C(INODE:OFFSET), and a file whose inode differs
        (rotated since) is read from offset 0.
    type: str
  since:
    description:
      - Where this run's log starts, when it cannot be told otherwise.
      - For a journal without an invocation ID, any C(journalctl --since) value (default the unit's start).
      - For a log file, a byte offset (default 0, or where O(cursor) points after a rotation).
    type: str
  start_time:
    description:
      - When the server started, in seconds since the epoch; used for RV(elapsed) and O(timeout) when neither a unit
        nor a process start time is known.
    type: float
  poll_interval:
    description:
      - Seconds between checks of the process and the log (the journal follow pipe wakes up at once).
      - While a process is watched, at most 0.1 s, the period of the look at its ranks.
    type: float
    default: 0.1
  journal_mode:
    description:
      - V(follow) keeps one C(journalctl -f) running and blocks on its pipe (lowest latency);
        V(poll) runs C(journalctl --after-cursor) every O(poll_interval).
    type: str
    choices: [follow, poll]
    default: follow
  fatal_patterns:
    description:
      - Extra regular expressions that mark a fatal log line, on top of the built-in ones.
      - Each item is a string (reason C(crashed)) or a dict with C(regex) and C(reason).
    type: list
    elements: raw
    default: []
  telling_patterns:
    description: Extra regular expressions for the most telling evidence line of a traceback.
    type: list
    elements: str
    default: []
  tail_lines:
    description: Number of log lines returned in RV(log_tail).
    type: int
    default: 40
  probe:
    description:
      - One request to send once the server is ready, while its process and log are still watched, so that a
        server that dies on its first request is classified (C(crashed), C(killed), ...) by this same call.
      - The status is C(ready) only when the request is answered 200 with a JSON body; the text is not judged
        (the screen's dummy weights give random text). Use M(llmserve.sglang.smoke_generate) to judge text.
      - When the request fails and the process neither dies nor logs a fatal line within about two seconds,
        the status is C(unhealthy) and RV(probe) says how the request failed.
      - Not sent in check mode. Only for a server that serves the API (a multi-node group's rank 0; the other
        ranks answer nothing but their health endpoint).
    type: dict
    suboptions:
      endpoint:
        description: The endpoint, as in M(llmserve.sglang.smoke_generate)'s prompts.
        type: str
        default: /generate
      prompt:
        description: The prompt text.
        type: str
        default: The capital city of France is
      max_tokens:
        description: Tokens to generate.
        type: int
        default: 8
      model:
        description: The served model name, for the OpenAI-style endpoints.
        type: str
      timeout:
        description: Seconds the request may take.
        type: float
        default: 60
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
    support: full
    details: The action plugin repeats the module's call for O(progress) and prints the progress lines.
  check_mode:
    support: full
    details: Nothing is changed in any mode. In check mode the state is inspected once and returned without waiting.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - The server's own crash path (a worker's exception, SIGQUIT to the parent, SIGKILL of the tree) ends with
    signal 9 even when the log says why; the log's reason wins over C(killed) then, and RV(signal) still says 9.
  - C(killed) with RV(log_said_anything=false) usually means the kernel OOM killer or a native crash before any output.
seealso:
  - module: llmserve.sglang.sglang_launch
  - module: llmserve.sglang.smoke_generate
'''

EXAMPLES = r'''
- name: Wait for the trial server, printing progress every 10 s
  llmserve.sglang.await_server_ready:
    service_name: sglang-trial
    port: 30000
    api_key: "{{ sglang_api_key | default(omit) }}"
    timeout: 3600
    hang_timeout: 600
    step: 10
    cursor: "{{ _wait.cursor | default(omit) }}"
  register: _wait
  until: _wait.status != 'loading'
  retries: 400
  delay: 0

- name: Screen a start with dummy weights - ready, then one short request whose text is not judged
  llmserve.sglang.await_server_ready:
    service_name: sglang-trial
    timeout: 300
    probe:
      prompt: The capital city of France is
      max_tokens: 8
  register: _screen

- name: Watch a server started by hand with its output in a file
  llmserve.sglang.await_server_ready:
    log_path: /var/log/sglang.log
    pid: 12345
    timeout: 900
  register: ready
'''

RETURN = r'''
status:
  description: C(ready), C(loading) (only with O(step)), or the failure (same as RV(reason)).
  returned: always
  type: str
  sample: crashed
reason:
  description:
    - Why it failed, one of C(crashed), C(killed), C(oom), C(nan), C(hang), C(timeout), C(unhealthy); null when ready or loading.
  returned: always
  type: str
  sample: crashed
evidence:
  description:
    - The lines that say why, most telling first (the traceback's telling line, the final exception, the fatal marker).
    - A process that ended without a fatal marker first gets a line that says how (C(process PID ended (exit status N))),
      unless it exited after a traceback of its own (for example an argument combination SGLang refuses at start-up);
      then that exception line comes first.
  returned: always
  type: list
  elements: str
  sample:
    - "RuntimeError: Error in function 'TrtllmGenBatchedGemmRunner' at
      /root/ml-env/lib/python3.11/site-packages/flashinfer/data/csrc/trtllm_batched_gemm_runner.cu:218: The trtllm-gen
      batched GEMM cubin manifest contains no kernels runnable on sm120; this backend currently ships cubins for sm100,
      sm103 and sm107."
    - "[2026-05-01 12:00:00 TP3] Scheduler hit an exception: Traceback (most recent call last):"
log_tail:
  description: The last O(tail_lines) lines of this run's log.
  returned: always
  type: list
  elements: str
milestone:
  description:
    - The latest start-up milestone seen, one of C(init_parallel), C(load_begin), C(loading_shards), C(load_end),
      C(kv_cache), C(cuda_graph_begin), C(cuda_graph), C(engine_up), C(http_up), C(ready); null before the first.
  returned: always
  type: str
  sample: loading_shards
milestone_detail:
  description: Detail of the milestone, e.g. the checkpoint shard progress.
  returned: always
  type: str
  sample: 50% (32/64)
milestone_line:
  description: The log line of the latest milestone.
  returned: always
  type: str
elapsed:
  description: Seconds since the server started (unit or process start, or O(start_time); else since this call began).
  returned: always
  type: float
  sample: 184.2
seconds:
  description: Seconds this call took.
  returned: always
  type: float
  sample: 10.0
signal:
  description: The signal number that ended the process, when it ended by a signal and that is known.
  returned: always
  type: int
  sample: 9
signal_name:
  description: The name of RV(signal), e.g. C(KILL).
  returned: always
  type: str
  sample: KILL
exit_code:
  description: The exit status of the process, when it exited normally and that is known.
  returned: always
  type: int
log_said_anything:
  description: Whether this run wrote any log line at all.
  returned: always
  type: bool
cursor:
  description: Where the log was read up to; pass it back as O(cursor) to continue.
  returned: always
  type: str
pid:
  description: The watched process ID (0 when unknown).
  returned: always
  type: int
health_status:
  description: The last HTTP status of the health endpoint (null when not probed or no answer).
  returned: always
  type: int
probe:
  description:
    - The request of O(probe) - C(ok), C(reason) (C(http_error) or C(timeout) when it failed), C(detail), C(status),
      C(seconds), C(text); null when O(probe) is not set or the request was not sent (not ready, check mode).
  returned: always
  type: dict
  sample: {ok: true, reason: null, detail: null, status: 200, seconds: 0.21, text: " Paris"}
child_exit:
  description:
    - The first child process (scheduler, detokenizer) the log says died - C(name) (C(scheduler_0)), C(pid), C(exit_code)
      (as SGLang logs it, C(-9) for SIGKILL), C(signal), C(signal_name), C(reason), C(line); null when none did.
    - When the wait saw a rank die in /proc and the log had not said so by the verdict, that rank - C(name) its
      process title (C(sglang::scheduler_TP1)), C(exit_code) and C(signal) from its wait status (null when its parent
      had already reaped it), C(line) the evidence line (C(sglang::scheduler_TP1 (pid 4243) exited (signal 9/KILL),
      main process 4242 still running)).
    - A scheduler that dies while the main process still lives is decided at that line (C(killed) for SIGKILL or
      SIGTERM, C(oom) when systemd marks the unit C(Result=oom-kill), else C(crashed)) unless a traceback or another
      marker said why before; RV(signal) and RV(exit_code) are the main process's and stay null then.
  returned: always
  type: dict
  sample: {name: scheduler_0, pid: 18252, exit_code: -9, signal: 9, signal_name: KILL, reason: killed}
unit:
  description: The unit's state from systemd (C(ActiveState), C(SubState), C(Result), C(InvocationID), ...), when O(service_name) is set.
  returned: when O(service_name) is set
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmserve.sglang.plugins.module_utils import _readiness


def main():
    module = AnsibleModule(argument_spec=_readiness.argument_spec(), required_one_of=_readiness.REQUIRED_ONE_OF,
                           supports_check_mode=True)
    _readiness.run(module)


if __name__ == '__main__':
    main()
