# shellcheck shell=bash
# Shared by the .ci scripts that run extra local servers (pg-ha, pgbouncer,
# galera): where their files live, how to run a command as a service user,
# how to wait for a port, and a timer. Source it; it does nothing by itself.
#
# Every extra server keeps its data, sockets, logs, configs and pid files
# under one base folder, $SQLLOCK_CI_DIR (default ${TMPDIR:-/tmp}/sqllock-ci),
# never in the repository. Servers are found by port, pid file or data
# directory, never by executable name: the main PostgreSQL and MariaDB run on
# the same machine, beside several extra `postgres` and `mariadbd`.

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

CI_DIR="${SQLLOCK_CI_DIR:-${TMPDIR:-/tmp}/sqllock-ci}"

# Tools run as postgres or mysql fail in a working directory they cannot
# read (initdb does).
cd /

# ci_log MSG: a progress line, with the seconds since ci_timer began.
ci_log() {
  awk -v a="${CI_T0:-$EPOCHREALTIME}" -v b="$EPOCHREALTIME" -v msg="$*" \
    'BEGIN { printf "== [%5.1fs] %s\n", b - a, msg }' >&2
}
ci_die() { printf '%s: %s\n' "${CI_NAME:-ci}" "$*" >&2; exit 1; }

# ci_timer NAME ACTION: print on exit (to stderr, so `env` output stays
# eval-able) how long the action took and whether it failed.
ci_timer() {
  CI_NAME="$1"; CI_ACTION="$2"; CI_T0="$EPOCHREALTIME"
  trap 'ci_end $?' EXIT
}
ci_end() {
  awk -v a="$CI_T0" -v b="$EPOCHREALTIME" -v what="$CI_NAME $CI_ACTION" \
    -v how="$([ "$1" = 0 ] && echo "done" || echo FAILED)" \
    'BEGIN { printf "== %s: %s in %.1fs\n", what, how, b - a }' >&2
}

# ci_as USER CMD...: run CMD as a service user, as root or through sudo.
ci_as() { local u="$1"; shift; $SUDO runuser -u "$u" -- "$@"; }

# ci_dir PATH OWNER MODE: create PATH owned by OWNER and check the owner can
# write it (a private $TMPDIR would hide it from the service users).
ci_dir() {
  $SUDO install -d -o "$2" -g "$(id -gn "$2")" -m "$3" "$1"
  ci_as "$2" test -w "$1" || ci_die "$2 cannot write $1: set SQLLOCK_CI_DIR to a folder others can traverse"
}

# ci_base: create the base folder, traversable by the service users.
ci_base() {
  # Unix socket paths end at 107 bytes; the longest of ours adds 30.
  [ "${#CI_DIR}" -le 75 ] || ci_die "SQLLOCK_CI_DIR is too long for Unix socket paths: $CI_DIR"
  $SUDO install -d -m 755 "$CI_DIR"
}

# ci_base_gone: remove the base folder once no script keeps anything there.
ci_base_gone() {
  $SUDO rmdir "$CI_DIR" 2>/dev/null || true
}

# ci_port_open PORT: something accepts TCP connections on 127.0.0.1:PORT.
ci_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ci_ports_free PORT...: fail naming the first port someone else listens on.
ci_ports_free() {
  local p
  for p in "$@"; do
    if ci_port_open "$p"; then ci_die "port $p is in use by another program"; fi
  done
}

# ci_pid_alive PIDFILE [MATCH]: the pid file names a live process (whose
# command line contains MATCH, if given: guards against a reused pid).
# Prints the pid.
ci_pid_alive() {
  local pid cmdline
  pid="$($SUDO cat "$1" 2>/dev/null | head -1 | tr -dc 0-9)" || true
  [ -n "$pid" ] && [ -e "/proc/$pid" ] || return 1
  if [ -n "${2:-}" ]; then
    cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
    case "$cmdline" in *"$2"*) ;; *) return 1 ;; esac
  fi
  echo "$pid"
}

# ci_wait_gone PID SECONDS: wait for PID to exit.
ci_wait_gone() {
  for _ in $(seq 1 $(($2 * 10))); do
    [ -e "/proc/$1" ] || return 0
    sleep 0.1
  done
  return 1
}

# ci_retry SECONDS CMD...: run CMD every 0.2s until it succeeds.
ci_retry() {
  local secs="$1"; shift
  for _ in $(seq 1 $((secs * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

# ci_pg_bin: the bin folder of the newest installed PostgreSQL major version.
ci_pg_bin() {
  local v
  v="$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -1)"
  [ -n "$v" ] && [ -x "/usr/lib/postgresql/$v/bin/pg_ctl" ] || ci_die "PostgreSQL is not installed"
  echo "/usr/lib/postgresql/$v/bin"
}
