\set i random(0, 31)
\set j random(32, 63)
\set k random(1, 1000000000000)
\startpipeline
BEGIN;
SELECT pg_try_advisory_xact_lock(:k), set_config('client_connection_check_interval', '1s', true) || set_config('idle_in_transaction_session_timeout', '60000', true), transaction_timestamp();
\endpipeline
SELECT count(*), max(balance) FROM (SELECT balance FROM idem_pgbench.accounts WHERE id IN (('bench-' || :i), ('bench-' || :j)) FOR UPDATE) x;
UPDATE idem_pgbench.accounts SET balance = balance - 1 WHERE id = ('bench-' || :i) AND balance >= 1;
UPDATE idem_pgbench.accounts SET balance = balance + 1 WHERE id = ('bench-' || :j);
INSERT INTO idem_pgbench.transfers (src, dst, amount, created_at) VALUES (('bench-' || :i), ('bench-' || :j), 1, 12345) RETURNING id;
\startpipeline
INSERT INTO idem_pgbench.rec VALUES ('user-bench', 'key-' || :k, 'sha256-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG', 'completed', 201, '{"Content-Type":["application/json"],"Location":["/transfers/123456"]}', '\x7b226964223a3132333435362c2266726f6d223a2262656e63682d31222c22746f223a2262656e63682d32222c22616d6f756e74223a312c22637265617465645f6174223a22323032362d31312d33305431373a35333a34302e3132333435363738395a227d', now(), now() + interval '24 hours');
COMMIT;
\endpipeline
