package postgres

// NextQueuedSQL exposes the queue page query to the plan test.
const NextQueuedSQL = nextQueuedSQL
