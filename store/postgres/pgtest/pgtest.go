// Package pgtest starts a throwaway PostgreSQL cluster for tests of the
// PostgreSQL store (DESIGN.md §7): initdb into a temporary directory as an
// unprivileged user, listen on a random 127.0.0.1 port and a unix socket in that
// directory, stop and remove it at the end. A package shares one cluster through
// Main in its TestMain, started by the first test that calls DSN (so a run of
// other tests costs nothing); each test takes a fresh schema of it.
//
// When no PostgreSQL can be started, tests calling DSN skip with the reason,
// unless the environment has CI=true: then they fail.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BinEnv names the environment variable that overrides the directory holding
// initdb and pg_ctl; otherwise the newest /usr/lib/postgresql/*/bin is used.
const BinEnv = "OPENBOT_PG_BIN"

// Server is a running throwaway cluster.
type Server struct {
	dir  string // temporary directory: data/, socket, log
	bin  string
	port int
	as   string // OS user running the server ("" = the current one)
	seq  atomic.Int64
}

var (
	inMain bool
	once   sync.Once
	shared *Server
	whyNot error
)

// Main is a TestMain body: it runs the tests, stops the shared cluster if one
// was started, and returns the exit code.
func Main(m *testing.M) int {
	inMain = true
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	return code
}

// DSN returns a connection string for a new, empty schema of the shared
// cluster (search_path set to it), starting the cluster on first use. Without
// a cluster it skips t, or fails it when CI=true.
func DSN(t testing.TB) string {
	t.Helper()
	if !inMain {
		t.Fatal("pgtest.DSN needs pgtest.Main in the package's TestMain")
	}
	once.Do(func() { shared, whyNot = Start() })
	if shared == nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL cannot be started and CI=true: %v", whyNot)
		}
		t.Skipf("PostgreSQL tests skipped: no server could be started (%v); set CI=true to make this a failure", whyNot)
	}
	dsn, err := shared.NewSchema(t.Context())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// Own starts a cluster of t's own, stopped and removed when t ends, for a
// test that restarts it (Restart) or otherwise disturbs the server. Without a
// cluster it skips t, or fails it when CI=true, as DSN does.
func Own(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL cannot be started and CI=true: %v", err)
		}
		t.Skipf("PostgreSQL tests skipped: no server could be started (%v); set CI=true to make this a failure", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Start initialises and starts a cluster in a new temporary directory.
func Start() (*Server, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "openbot-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin}
	if os.Geteuid() == 0 { // initdb refuses root: run the cluster as postgres
		u, err := user.Lookup("postgres")
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root and no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		s.as = "postgres"
	}
	if s.port, err = freePort(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run("initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync", "--locale=C"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	if err := s.start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off -c max_connections=200", s.port, s.dir)
	if out, err := s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-l", filepath.Join(s.dir, "log"), "-w", "-t", "60", "-o", opts, "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		return fmt.Errorf("pg_ctl start: %w: %s %s", err, out, log)
	}
	return nil
}

// Restart stops the cluster in fast mode (every session is ended and its
// open transaction rolled back), leaves it down for down, and starts it again
// on the same port and data, as an operator's restart or a failover does; it
// returns once the server accepts connections again.
func (s *Server) Restart(down time.Duration) error {
	if out, err := s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop: %w: %s", err, out)
	}
	time.Sleep(down) // the outage itself
	return s.start()
}

// Stop stops the cluster at once and removes its directory.
func (s *Server) Stop() {
	_, _ = s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	_ = os.RemoveAll(s.dir)
}

// AdminDSN is the connection string of the cluster's postgres database.
func (s *Server) AdminDSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// NewSchema creates a fresh schema and returns a DSN whose search_path is it.
func (s *Server) NewSchema(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.seq.Add(1))
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.AdminDSN())
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		return "", err
	}
	return s.AdminDSN() + "&search_path=" + name, nil
}

func (s *Server) run(tool string, args ...string) ([]byte, error) {
	path := filepath.Join(s.bin, tool)
	var cmd *exec.Cmd
	if s.as != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.as, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = s.dir
	return cmd.CombinedOutput()
}

func findBin() (string, error) {
	if b := os.Getenv(BinEnv); b != "" {
		return b, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("initdb not found (install the postgresql package or set " + BinEnv + ")")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Session is one connection of a test's own to the server, for SQL the test
// runs beside the code under test (ending its backends, holding locks), so
// the test needs no driver of its own.
type Session struct{ conn *pgx.Conn }

// Connect opens a Session on dsn (as its user: the cluster's superuser for
// DSN and NewSchema).
func Connect(ctx context.Context, dsn string) (*Session, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return &Session{conn: conn}, nil
}

// Int runs query, which returns one integer, and returns it.
func (s *Session) Int(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := s.conn.QueryRow(ctx, query, args...).Scan(&n)
	return n, err
}

// Hold runs stmt (a LOCK TABLE, say) in a transaction it keeps open for d,
// then commits it.
func (s *Session) Hold(ctx context.Context, stmt string, d time.Duration) error {
	return pgx.BeginFunc(ctx, s.conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return err
		}
		select {
		case <-time.After(d): // holding is the point
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// Close closes the connection.
func (s *Session) Close() { _ = s.conn.Close(context.Background()) }
