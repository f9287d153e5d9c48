-- Version 4: the semantic index of messages (seed §9): one embedding per
-- message, filled in the background after ingest, read per thread.

CREATE TABLE message_vectors (
    thread  bigint NOT NULL,
    message bigint NOT NULL,
    data    json NOT NULL,
    PRIMARY KEY (thread, message)
);
