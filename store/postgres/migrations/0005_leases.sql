-- Version 5: leases, the claims of processes sharing this database (DESIGN.md
-- §7, core/lease.go): an outbox lane, an account's ingress. Running runs carry
-- their own claim in their record.

CREATE TABLE leases (
    key   text PRIMARY KEY,
    owner text NOT NULL,
    until timestamptz NOT NULL,
    data  json NOT NULL
);
