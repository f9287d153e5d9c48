-- Version 1: the records of core.Store (DESIGN.md §7). Every record is the JSON
-- of its core type in a json column (json, not jsonb: raw fields round-trip
-- byte for byte); the columns beside it are what the indexes and lookups need.
-- IDs come from the counters table, updated inside the writing transaction,
-- so a rolled-back write assigns nothing and IDs stay gapless from 1.

CREATE TABLE counters (
    name  text PRIMARY KEY,
    value bigint NOT NULL
);

CREATE TABLE actors (
    id   text PRIMARY KEY,
    data json NOT NULL
);

CREATE TABLE bots (
    handle text PRIMARY KEY,
    data   json NOT NULL
);

CREATE TABLE threads (
    id   bigint PRIMARY KEY,
    data json NOT NULL
);

CREATE TABLE thread_keys (
    key    text PRIMARY KEY,
    thread bigint NOT NULL
);

CREATE TABLE messages (
    id     bigint PRIMARY KEY,
    thread bigint NOT NULL,
    data   json NOT NULL
);
CREATE INDEX messages_by_thread ON messages (thread, id);

CREATE TABLE items (
    id     bigint PRIMARY KEY,
    actor  text NOT NULL,
    thread bigint NOT NULL,
    status text NOT NULL,
    data   json NOT NULL
);
CREATE INDEX items_queue ON items (actor, id) WHERE status = 'queued';
CREATE INDEX items_queue_thread ON items (actor, thread, id) WHERE status = 'queued';
CREATE INDEX items_open ON items (status, id) WHERE status IN ('queued', 'processing');

CREATE TABLE runs (
    id     bigint PRIMARY KEY,
    status text NOT NULL,
    data   json NOT NULL
);
CREATE INDEX runs_open ON runs (status, id) WHERE status IN ('queued', 'running', 'waiting_human');

-- pos is the store-wide order of appends, the console's event stream cursor.
CREATE TABLE run_events (
    run  bigint NOT NULL,
    seq  bigint NOT NULL,
    pos  bigint NOT NULL UNIQUE,
    data json NOT NULL,
    PRIMARY KEY (run, seq)
);

CREATE TABLE outbox (
    id      bigint PRIMARY KEY,
    pending boolean NOT NULL,
    data    json NOT NULL
);
CREATE INDEX outbox_pending ON outbox (id) WHERE pending;

CREATE TABLE seen (
    key     text PRIMARY KEY,
    message bigint NOT NULL
);

CREATE TABLE todos (
    bot    text NOT NULL,
    thread bigint NOT NULL,
    data   json NOT NULL,
    PRIMARY KEY (bot, thread)
);

CREATE TABLE activity (
    seq  bigint PRIMARY KEY,
    data json NOT NULL
);

CREATE TABLE cursors (
    name  text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE questions (
    id      bigint PRIMARY KEY,
    token   text NOT NULL UNIQUE,
    pending boolean NOT NULL,
    data    json NOT NULL
);
CREATE INDEX questions_pending ON questions (id) WHERE pending;
