-- Version 6: no lock spans the schema. IDs come from one sequence per kind
-- (ids_<kind>), drawn outside the writing transaction's fate: a rolled-back or
-- retried write leaves a gap, and IDs of concurrent writers need not commit in
-- order. Each sequence starts after the counter it replaces.
--
-- thread_locks has one row per thread that a write transaction touches before
-- it writes the thread's records (messages, items, runs, outbox entries, todos,
-- questions): two transactions changing one thread conflict on that row and
-- the later one runs again on a fresh snapshot, while transactions on other
-- threads proceed in parallel.

DO $$
DECLARE
    kind text;
    last bigint;
BEGIN
    FOREACH kind IN ARRAY ARRAY['threads', 'messages', 'items', 'runs', 'run_event_log',
        'outbox', 'activity', 'questions', 'usage', 'memories', 'reflections']
    LOOP
        SELECT value INTO last FROM counters WHERE name = kind;
        EXECUTE format('CREATE SEQUENCE ids_%s AS bigint START WITH %s', kind, coalesce(last, 0) + 1);
    END LOOP;
END
$$;

DROP TABLE counters;

CREATE TABLE thread_locks (
    thread bigint PRIMARY KEY,
    n      bigint NOT NULL
);
