#!/bin/sh
# A client.authentication.k8s.io exec credential plugin for gpuctl's unit tests.
# Every behaviour is chosen by environment variables (set them in the kubeconfig's exec.env):
#   PLUGIN_COUNT_FILE  a line is appended per run; the run number replaces %n in PLUGIN_TOKEN
#   PLUGIN_INFO_FILE   receives $KUBERNETES_EXEC_INFO
#   PLUGIN_ARGS_FILE   receives the arguments, one per line
#   PLUGIN_ENV_FILE    receives the environment (env output)
#   PLUGIN_STDIN_FILE  receives where stdin points (readlink /proc/self/fd/0)
#   PLUGIN_API_VERSION apiVersion to answer with (default: the one in KUBERNETES_EXEC_INFO)
#   PLUGIN_KIND        kind to answer with (default ExecCredential)
#   PLUGIN_TOKEN       status.token
#   PLUGIN_CERT_FILE / PLUGIN_KEY_FILE  status.clientCertificateData / clientKeyData
#   PLUGIN_EXPIRATION  status.expirationTimestamp
#   PLUGIN_NO_STATUS   set: answer without a status
#   PLUGIN_OUTPUT      answer exactly this instead
#   PLUGIN_EXIT        exit with this code after a message on stderr
#   PLUGIN_FLOOD       set: write to stdout without end (a broken plugin)
set -eu

run=1
if [ -n "${PLUGIN_COUNT_FILE:-}" ]; then
  echo run >> "$PLUGIN_COUNT_FILE"
  run=$(wc -l < "$PLUGIN_COUNT_FILE" | tr -d ' ')
fi
[ -n "${PLUGIN_INFO_FILE:-}" ] && printf '%s' "${KUBERNETES_EXEC_INFO:-}" > "$PLUGIN_INFO_FILE"
if [ -n "${PLUGIN_ARGS_FILE:-}" ]; then
  : > "$PLUGIN_ARGS_FILE"
  for arg in "$@"; do printf '%s\n' "$arg" >> "$PLUGIN_ARGS_FILE"; done
fi
[ -n "${PLUGIN_ENV_FILE:-}" ] && env > "$PLUGIN_ENV_FILE"
[ -n "${PLUGIN_STDIN_FILE:-}" ] && readlink /proc/self/fd/0 > "$PLUGIN_STDIN_FILE"

[ -n "${PLUGIN_FLOOD:-}" ] && exec yes '{"kind":"ExecCredential"}'
if [ -n "${PLUGIN_EXIT:-}" ]; then
  echo "exec-plugin.sh: failing on purpose with exit code $PLUGIN_EXIT" >&2
  exit "$PLUGIN_EXIT"
fi
if [ -n "${PLUGIN_OUTPUT+set}" ]; then
  printf '%s' "$PLUGIN_OUTPUT"
  exit 0
fi

api_version=${PLUGIN_API_VERSION:-$(printf '%s' "${KUBERNETES_EXEC_INFO:-}" | sed -n 's/.*"apiVersion":"\([^"]*\)".*/\1/p')}
kind=${PLUGIN_KIND:-ExecCredential}

# A PEM file's content as a JSON string body: newlines and quotes escaped (PEM has no backslashes).
json_file() { awk '{ gsub(/"/, "\\\""); printf "%s\\n", $0 }' "$1"; }

status=""
add() { if [ -n "$status" ]; then status="$status,$1"; else status="$1"; fi; }
if [ -n "${PLUGIN_TOKEN:-}" ]; then
  token=$(printf '%s' "$PLUGIN_TOKEN" | sed "s/%n/$run/g")
  add "\"token\":\"$token\""
fi
[ -n "${PLUGIN_CERT_FILE:-}" ] && add "\"clientCertificateData\":\"$(json_file "$PLUGIN_CERT_FILE")\""
[ -n "${PLUGIN_KEY_FILE:-}" ] && add "\"clientKeyData\":\"$(json_file "$PLUGIN_KEY_FILE")\""
[ -n "${PLUGIN_EXPIRATION:-}" ] && add "\"expirationTimestamp\":\"$PLUGIN_EXPIRATION\""

if [ -n "${PLUGIN_NO_STATUS:-}" ]; then
  printf '{"kind":"%s","apiVersion":"%s"}\n' "$kind" "$api_version"
else
  printf '{"kind":"%s","apiVersion":"%s","status":{%s}}\n' "$kind" "$api_version" "$status"
fi
