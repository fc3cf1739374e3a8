#!/bin/bash
# run.sh [rounds] [transactions]: the server's CPU per transaction of the
# transfers service's statements, plain and with the record's statements
# (and without each of them), through pgbench on the PostgreSQL of
# IDEM_PG_DSN (default postgres://postgres@127.0.0.1:5432/test), which must
# run on this host: its CPU is read from /proc (every process named
# postgres). docs/BENCHMARKS.md, "The same statements through pgbench", quotes its output.
set -euo pipefail
cd "$(dirname "$0")"
dsn=${IDEM_PG_DSN:-postgres://postgres@127.0.0.1:5432/test}
rounds=${1:-2}
txns=${2:-5000}
# variant NAME: the script of NAME, derived from idem.sql (the transfer with
# the record's statements, as pgstore sends them) by dropping or changing
# one statement; plain_pipe drops all of the record's.
variant() {
	case $1 in
	idem) cat idem.sql ;;
	idem_noins) grep -v '^INSERT INTO idem_pgbench.rec ' idem.sql ;;
	idem_nosel) grep -v '^SELECT fingerprint' idem.sql ;;
	idem_nolock) grep -v '^SELECT pg_try_advisory_xact_lock' idem.sql ;;
	idem_nocfg) sed "s/, set_config('client_connection_check_interval', '1s', true) || set_config('idle_in_transaction_session_timeout', '60000', true)//" idem.sql ;;
	idemc) sed 's/idem_pgbench\.rec /idem_pgbench.recc /' idem.sql ;;
	plain_pipe) grep -v -e '^\\set k' -e '^SELECT pg_try_advisory_xact_lock' -e '^SELECT fingerprint' -e '^INSERT INTO idem_pgbench.rec ' idem.sql ;;
	*) echo "run.sh: no variant $1" >&2; return 1 ;;
	esac
}
ticks() {
	for stat in /proc/[0-9]*/stat; do
		# comm is the second field, in parentheses; utime, stime, cutime
		# and cstime are the 14th to 17th.
		awk '$2 ~ /^\(postgres/ { s = $0; sub(/^.*\) /, "", s); split(s, f, " "); print f[12] + f[13] + f[14] + f[15] }' "$stat" 2>/dev/null || true
	done | awk '{ t += $1 } END { print t + 0 }'
}
psql -q -v ON_ERROR_STOP=1 "$dsn" -f schema.sql
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; psql -q "$dsn" -c "DROP SCHEMA IF EXISTS idem_pgbench CASCADE"' EXIT
for r in $(seq "$rounds"); do
	for script in plain_pipe idem idem_noins idem_nosel idem_nolock idem_nocfg idemc; do
		before=$(ticks)
		variant "$script" > "$tmp/$script.sql"
		out=$(pgbench -n -M prepared -c 2 -t "$txns" -f "$tmp/$script.sql" "$dsn" 2>&1) || { echo "$script: $out" >&2; exit 1; }
		after=$(ticks)
		# A tick is 10 ms (USER_HZ 100); two clients ran txns each.
		echo "round $r $script: $(( (after - before) * 10000 / (txns * 2) )) µs of server CPU per transaction, $(echo "$out" | grep -o 'tps = [0-9.]*' | head -1)"
	done
done
