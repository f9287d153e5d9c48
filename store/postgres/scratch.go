package postgres

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// scratchName is what ScratchSchema accepts: a plain lowercase identifier.
var scratchName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`) })

// ScratchSchema creates the empty schema name (lowercase letters, digits and
// underscores, at most 63) in the database dsn names, and returns a DSN whose
// search_path is that schema, for Open, and drop, which removes the schema
// and everything in it. It is for the benchmarks (BenchmarkPostgres) and tools that must leave the
// database's own tables alone. An existing schema of that name is an error.
// Connecting is bounded by DefaultConnectTimeout and ctx.
func ScratchSchema(ctx context.Context, dsn, name string) (scratch string, drop func(context.Context) error, err error) {
	if !scratchName().MatchString(name) {
		return "", nil, fmt.Errorf("store postgres: scratch schema name %q: want lowercase letters, digits, underscores", name)
	}
	if scratch, err = withSearchPath(dsn, name); err != nil {
		return "", nil, err
	}
	exec := func(ctx context.Context, sql string) error {
		ctx, cancel := context.WithTimeout(ctx, DefaultConnectTimeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return fmt.Errorf("store postgres: %w", err)
		}
		defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("store postgres: %s: %w", sql, err)
		}
		return nil
	}
	quoted := pgx.Identifier{name}.Sanitize()
	if err := exec(ctx, "CREATE SCHEMA "+quoted); err != nil {
		return "", nil, err
	}
	return scratch, func(ctx context.Context) error { return exec(ctx, "DROP SCHEMA "+quoted+" CASCADE") }, nil
}

// withSearchPath returns dsn (a URL or key=value string) with search_path set
// to schema.
func withSearchPath(dsn, schema string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("store postgres: parse dsn: %w", err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return strings.TrimSpace(dsn) + " search_path=" + schema, nil
}
