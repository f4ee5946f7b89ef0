#!/usr/bin/env bash
# Run tests/gpu/gpu_check.yml (gpu_info + gpu_reset against a real NVIDIA GPU) on this host and keep
# a transcript. Usage: tests/gpu/gpu-check.sh [OUTDIR]   (default /tmp/gpu-check-<date>)
#
# Environment:
#   GPU_CHECK_PYTHON       interpreter with PyTorch for the holders (default python3)
#   GPU_CHECK_GIB          GiB each holder allocates (default 20)
#   GPU_CHECK_INDEX        GPU index (default 0)
#   GPU_CHECK_EXPECT_ARCH  e.g. sm90: fail unless gpu_info reports it (default: not checked)
#   GPU_CHECK_EXPECT_NAME  e.g. "NVIDIA H200" (default: not checked)
#   ANSIBLE_PLAYBOOK       ansible-playbook to use (default: the one on PATH)
#   GPU_CHECK_EXTRA        more ansible-playbook arguments (word-split)
# Needs: nvidia-smi, ansible-core >= 2.17, PyTorch with CUDA; fuser (psmisc) is optional.
set -eu -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:-/tmp/gpu-check-$(date +%Y%m%d-%H%M%S)}
playbook_cmd=${ANSIBLE_PLAYBOOK:-ansible-playbook}
export LC_ALL=${LC_ALL:-C.UTF-8}

mkdir -p "$out"
out=$(cd "$out" && pwd)

# ansible_collections/llmserve/sglang -> this checkout, in a temporary tree
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/ansible_collections/llmserve"
ln -s "$repo" "$tree/ansible_collections/llmserve/sglang"
export ANSIBLE_COLLECTIONS_PATH="$tree"
export ANSIBLE_CONFIG="$repo/ansible.cfg"
export ANSIBLE_CALLBACK_RESULT_FORMAT=yaml ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0
export ANSIBLE_LOCAL_TEMP="$tree/tmp" ANSIBLE_REMOTE_TEMP="$tree/tmp"

python=${GPU_CHECK_PYTHON:-python3}
command -v "${playbook_cmd%% *}" >/dev/null || { echo "ERROR: $playbook_cmd not found (make setup, or set ANSIBLE_PLAYBOOK)"; exit 2; }

{
  echo "# gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n) ($(uname -r))"
  echo "# repo $repo ($(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
  echo "# $($playbook_cmd --version 2>&1 | head -n 1); holders: $python $("$python" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -n 1)"
  echo "# nvidia-smi: $(command -v nvidia-smi || echo missing); fuser: $(command -v fuser || echo 'missing (gpu_reset scans /proc)')"
  echo
} | tee "$out/transcript.txt"

start=$(date +%s.%N)
rc=0
# shellcheck disable=SC2086
$playbook_cmd -i localhost, -c local "$here/gpu_check.yml" \
  -e "ansible_python_interpreter=$(command -v python3)" \
  -e "gpu_check_out=$out" -e "gpu_check_python=$python" \
  -e "gpu_check_gib=${GPU_CHECK_GIB:-20}" -e "gpu_check_index=${GPU_CHECK_INDEX:-0}" \
  -e "gpu_check_expect_arch=${GPU_CHECK_EXPECT_ARCH:-}" -e "{\"gpu_check_expect_name\": \"${GPU_CHECK_EXPECT_NAME:-}\"}" \
  ${GPU_CHECK_EXTRA:-} 2>&1 | tee -a "$out/transcript.txt" || rc=$?
end=$(date +%s.%N)
{
  echo
  echo "# playbook rc=$rc, $(python3 -c "print(round($end - $start, 1))") s wall"
  if [ -f "$out/json/timings.json" ]; then echo "# timings (json/timings.json):"; cat "$out/json/timings.json"; fi
  echo "# outputs in $out"
} | tee -a "$out/transcript.txt"
exit "$rc"
