-- Version 3: bot memory (seed §9): each bot's memories, and the pending
-- reflections that survive a restart (seed G7).

CREATE TABLE memories (
    id   bigint PRIMARY KEY,
    bot  text NOT NULL,
    data json NOT NULL
);
CREATE INDEX memories_bot ON memories (bot, id);

CREATE TABLE pending_reflections (
    seq  bigint PRIMARY KEY,
    data json NOT NULL
);
