#!/usr/bin/env bash
# Start a throwaway PostgreSQL server for tests and CI; print its URL on stdout (nothing else).
#
#   export BRANCHPOINT_TEST_POSTGRES_URL="$(scripts/start-postgres.sh)"
#
# Idempotent: installs the Debian `postgresql` package when no server binaries are found, creates
# a cluster in ${TMPDIR:-/tmp}/branchpoint-pg on the first call, starts it when it is down, and
# (re-)creates role and database `branchpoint`. When the server is already up it only prints the URL.
# The server listens on 127.0.0.1 only, port $BRANCHPOINT_PG_PORT (default 54329), and trusts
# every local connection without a password: for local tests only, never for real data.
# Stop it with:  runuser -u postgres -- "$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)/pg_ctl" \
#                  -D "${TMPDIR:-/tmp}/branchpoint-pg/data" stop
set -euo pipefail

PORT="${BRANCHPOINT_PG_PORT:-54329}"
BASE="${TMPDIR:-/tmp}/branchpoint-pg"
DATA="$BASE/data"
LOG="$BASE/server.log"
URL="postgresql://branchpoint@127.0.0.1:${PORT}/branchpoint"

say() { echo "start-postgres: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

pg_bin() {
  # Newest installed major version's bin directory (Debian layout), or empty.
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

BIN="$(pg_bin)"
if [[ -z "$BIN" || ! -x "$BIN/initdb" ]]; then
  [[ "$(id -u)" == 0 ]] || die "PostgreSQL server binaries not found and not root: apt-get install postgresql"
  command -v apt-get >/dev/null || die "PostgreSQL server binaries not found and no apt-get to install them"
  say "installing the Debian postgresql package (apt-get, quiet)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || die "apt-get update failed"
  apt-get install -y -qq postgresql >&2 || die "apt-get install postgresql failed"
  BIN="$(pg_bin)"
  [[ -n "$BIN" && -x "$BIN/initdb" ]] || die "postgresql installed but no initdb under /usr/lib/postgresql/*/bin"
fi

# Run a server binary as the `postgres` user (the server refuses to run as root).
if [[ "$(id -u)" == 0 ]]; then
  id postgres >/dev/null 2>&1 || die "no 'postgres' user (the Debian package creates it)"
  as_pg() { runuser -u postgres -- "$@"; }
  mkdir -p "$BASE"
  chown postgres: "$BASE"
else
  as_pg() { "$@"; }
  mkdir -p "$BASE"
fi

ready() { "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -d postgres; }
psql_pg() { as_pg "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U postgres -d postgres "$@"; }
provisioned() {
  [[ "$(psql_pg -tA -c "SELECT 1 FROM pg_database WHERE datname = 'branchpoint'" 2>/dev/null)" == 1 ]]
}

if ready && provisioned; then
  echo "$URL"
  exit 0
fi

if ! ready; then
  if [[ ! -s "$DATA/PG_VERSION" ]]; then
    say "creating a throwaway cluster in $DATA (trust auth on 127.0.0.1, local tests only)"
    rm -rf "$DATA"
    as_pg "$BIN/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$BASE/initdb.log" 2>&1 \
      || as_pg "$BIN/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 --locale=C >"$BASE/initdb.log" 2>&1 \
      || { cat "$BASE/initdb.log" >&2; die "initdb failed"; }
  fi
  # A stale pid file from a killed server would block the start; pg_ctl status tells.
  if ! as_pg "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
    rm -f "$DATA/postmaster.pid"
  fi
  say "starting PostgreSQL on 127.0.0.1:$PORT (log: $LOG)"
  # Unix socket in the data dir: /var/run/postgresql may not exist or belong to another cluster.
  as_pg "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -c unix_socket_directories=$DATA -c max_connections=200" \
    start >&2 || { tail -n 20 "$LOG" >&2 || true; die "pg_ctl start failed (port $PORT in use?)"; }
  for _ in $(seq 1 60); do ready && break; sleep 0.5; done
  ready || { tail -n 20 "$LOG" >&2 || true; die "server did not become ready on 127.0.0.1:$PORT"; }
fi

psql_pg -tA -c "SELECT 1 FROM pg_roles WHERE rolname = 'branchpoint'" | grep -q 1 \
  || psql_pg -c "CREATE ROLE branchpoint LOGIN" || die "could not create role branchpoint"
provisioned || psql_pg -c "CREATE DATABASE branchpoint OWNER branchpoint" || die "could not create database branchpoint"

echo "$URL"
