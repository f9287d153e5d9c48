package postgres

// NextQueuedSQL exposes the queue page query to the plan test.
const NextQueuedSQL = nextQueuedSQL

// MaxConns is the store's pool bound.
func MaxConns(s *Store) int32 { return s.pool.Config().MaxConns }
