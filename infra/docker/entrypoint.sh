#!/bin/sh
# The lmforge image's entrypoint: one image, two roles (infra/README.md, "The container image").
#   Beam SDK harness: a runner starts the container with Beam's boot flags (--id=... --control_endpoint=...,
#       or --worker_pool for a Flink/Spark worker pool) -> Beam's boot program, which runs the SDK worker
#   lmforge: anything else -> `lmforge ARGS` (`docker run IMAGE pretrain --help`), or the command itself when
#       the first word is a program on PATH (`docker run IMAGE bash`, `... prefect worker start ...`)
# LMFORGE_ROLE=beam or LMFORGE_ROLE=lmforge forces a role (default auto). BEAM_BOOT and LMFORGE_BIN name the two
# programs (the image's defaults below; tests/unit/test_docker_image.py points them at stubs).
set -eu
BEAM_BOOT="${BEAM_BOOT:-/opt/apache/beam/boot}"
LMFORGE_BIN="${LMFORGE_BIN:-lmforge}"

beam_harness() {
  # every argument a flag, one of them boot's own: an lmforge command line starts with a subcommand instead
  case "${1:-}" in --*) ;; *) return 1 ;; esac
  for arg in "$@"; do
    case "$arg" in
      --id=*|--worker_pool|--worker_pool=*|--control_endpoint=*|--provision_endpoint=*|--logging_endpoint=*|--artifact_endpoint=*)
        return 0 ;;
    esac
  done
  return 1
}

case "${LMFORGE_ROLE:-auto}" in
  beam) exec "$BEAM_BOOT" "$@" ;;
  lmforge) exec "$LMFORGE_BIN" "$@" ;;
  auto) ;;
  *) echo "lmforge entrypoint: LMFORGE_ROLE must be beam, lmforge or auto, got '${LMFORGE_ROLE}'" >&2; exit 2 ;;
esac
if beam_harness "$@"; then
  exec "$BEAM_BOOT" "$@"
fi
case "${1:-}" in
  ""|-*) ;;
  *) if command -v "$1" >/dev/null 2>&1; then exec "$@"; fi ;;
esac
exec "$LMFORGE_BIN" "$@"
