-- The tables of run.sh: the transfers service's ledger and two copies of
-- the records table (pgstore's columns and primary key), the second with
-- scope and key in COLLATE "C".
DROP SCHEMA IF EXISTS idem_pgbench CASCADE;
CREATE SCHEMA idem_pgbench;
CREATE TABLE idem_pgbench.accounts (id text PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO idem_pgbench.accounts SELECT 'bench-' || g, 1::bigint << 50 FROM generate_series(0, 63) g;
CREATE TABLE idem_pgbench.transfers (id bigserial PRIMARY KEY, src text, dst text, amount bigint, created_at bigint, message_id text, batch_id text, row_id text);
CREATE TABLE idem_pgbench.rec (scope text NOT NULL, key text NOT NULL, fingerprint text NOT NULL, state text NOT NULL, status int NOT NULL, headers jsonb, body bytea, created_at timestamptz NOT NULL, expires_at timestamptz NOT NULL, PRIMARY KEY (scope, key));
CREATE INDEX ON idem_pgbench.rec (expires_at);
CREATE TABLE idem_pgbench.recc (scope text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL, fingerprint text NOT NULL, state text NOT NULL, status int NOT NULL, headers jsonb, body bytea, created_at timestamptz NOT NULL, expires_at timestamptz NOT NULL, PRIMARY KEY (scope, key));
CREATE INDEX ON idem_pgbench.recc (expires_at);
