# SPDX-License-Identifier: Apache-2.0
# Sourced first in a device call (the device tool's `run`, carrying [".gl", ".devpack"]): unpacks
# the builds scripts/gpu-prepare.sh packed, loads .gl/device-prefix.sh, and defines
#
#   stage NEED NAME [VAR=VALUE...] [ARG...]
#
# which runs `scripts/h200-session.sh NAME .devbuild /tmp/o/DIR ARG...` (with the VAR=VALUE in
# its environment; DIR is NAME, or NAME-<hash of the settings>) only when NEED seconds remain of
# the call's CALL_LIMIT (570 unless set before sourcing), then packs /tmp/o/DIR into
# $OUT/DIR.tar.gz: a stage's logs come back even where a later stage runs the call past its
# limit, and at most a few files come back per call. So one call runs the stages in order of
# priority and skips what no longer fits, for example:
#
#   export CALL_LIMIT=460; source scripts/device-call.sh; stage 200 tests; stage 80 mla-tiles
tar xJf .devpack/dev.tar.xz && source .gl/device-prefix.sh
CALL_T0=$SECONDS
stage() {
  local need="$1" name="$2" dir="$2"
  shift 2
  local envs=()
  while [[ $# -gt 0 && "$1" == *=* ]]; do envs+=("$1"); shift; done
  [[ ${#envs[@]} -gt 0 ]] && dir="$name-$(echo "${envs[*]}" | md5sum | cut -c1-6)"
  local left=$((${CALL_LIMIT:-570} - SECONDS + CALL_T0))
  if ((need > left)); then
    echo "##### skipped $name ${envs[*]}: $left s left"
    return
  fi
  echo "##### $(date +%T) $name ${envs[*]} $*"
  env "${envs[@]}" scripts/h200-session.sh "$name" .devbuild "/tmp/o/$dir" "$@"
  echo "##### $(date +%T) $name done"
  tar czf "$OUT/$dir.tar.gz" -C /tmp/o "$dir"
}
