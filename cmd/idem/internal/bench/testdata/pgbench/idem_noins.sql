\set i random(0, 31)
\set j random(32, 63)
\set k random(1, 1000000000000)
\startpipeline
BEGIN;
SELECT pg_try_advisory_xact_lock(:k), set_config('client_connection_check_interval', '1s', true) || set_config('idle_in_transaction_session_timeout', '60000', true), transaction_timestamp();
SELECT fingerprint, state, status, headers, body, created_at, expires_at FROM idem_pgbench.rec WHERE scope = 'user-bench' AND key = 'key-' || :k;
\endpipeline
SELECT count(*), max(balance) FROM (SELECT balance FROM idem_pgbench.accounts WHERE id IN (('bench-' || :i), ('bench-' || :j)) FOR UPDATE) x;
UPDATE idem_pgbench.accounts SET balance = balance - 1 WHERE id = ('bench-' || :i) AND balance >= 1;
UPDATE idem_pgbench.accounts SET balance = balance + 1 WHERE id = ('bench-' || :j);
INSERT INTO idem_pgbench.transfers (src, dst, amount, created_at) VALUES (('bench-' || :i), ('bench-' || :j), 1, 12345) RETURNING id;
\startpipeline
COMMIT;
\endpipeline
