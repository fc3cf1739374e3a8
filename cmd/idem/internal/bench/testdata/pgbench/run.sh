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
ticks() {
	for stat in /proc/[0-9]*/stat; do
		# comm is the second field, in parentheses; utime, stime, cutime
		# and cstime are the 14th to 17th.
		awk '$2 ~ /^\(postgres/ { s = $0; sub(/^.*\) /, "", s); split(s, f, " "); print f[12] + f[13] + f[14] + f[15] }' "$stat" 2>/dev/null || true
	done | awk '{ t += $1 } END { print t + 0 }'
}
psql -q -v ON_ERROR_STOP=1 "$dsn" -f schema.sql
trap 'psql -q "$dsn" -c "DROP SCHEMA IF EXISTS idem_pgbench CASCADE"' EXIT
for r in $(seq "$rounds"); do
	for script in plain_pipe idem idem_noins idem_nosel idem_nolock idem_nocfg idemc; do
		before=$(ticks)
		out=$(pgbench -n -M prepared -c 2 -t "$txns" -f "$script.sql" "$dsn" 2>&1) || { echo "$script: $out" >&2; exit 1; }
		after=$(ticks)
		# A tick is 10 ms (USER_HZ 100); two clients ran txns each.
		echo "round $r $script: $(( (after - before) * 10000 / (txns * 2) )) µs of server CPU per transaction, $(echo "$out" | grep -o 'tps = [0-9.]*' | head -1)"
	done
done
