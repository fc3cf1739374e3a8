\set i random(0, 31)
\set j random(32, 63)
\startpipeline
BEGIN;
\endpipeline
SELECT count(*), max(balance) FROM (SELECT balance FROM idem_pgbench.accounts WHERE id IN (('bench-' || :i), ('bench-' || :j)) FOR UPDATE) x;
UPDATE idem_pgbench.accounts SET balance = balance - 1 WHERE id = ('bench-' || :i) AND balance >= 1;
UPDATE idem_pgbench.accounts SET balance = balance + 1 WHERE id = ('bench-' || :j);
INSERT INTO idem_pgbench.transfers (src, dst, amount, created_at) VALUES (('bench-' || :i), ('bench-' || :j), 1, 12345) RETURNING id;
\startpipeline
COMMIT;
\endpipeline
