-- Version 2: the usage ledger of cost control, one entry per model call,
-- idempotent per key (run, call), and the running totals budgets read.

CREATE TABLE usage (
    seq  bigint PRIMARY KEY,
    key  text NOT NULL UNIQUE,
    data json NOT NULL
);

CREATE TABLE usage_totals (
    scope text PRIMARY KEY,
    data  json NOT NULL
);
