package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"openbot/admin"
	"openbot/config"
	"openbot/store/bolt"
	"openbot/store/postgres"
)

// apiReader reads the operator console's API for the CLI (DESIGN.md §10): in
// process over the store file when no server holds it, else through the running
// server's listener with admin.token, as `openbot approvals list` does. Either
// way the CLI sees the same JSON the API serves.
type apiReader struct {
	local  http.Handler // in-process API over the opened store, or nil
	base   string       // "http://host:port" of the running server
	token  string
	closer func()
}

// errNoStore: nothing has run with this config yet, so there is nothing to read.
var errNoStore = errors.New("no store yet")

// openAPI opens the store file read-side, or, when a running openbot holds it,
// checks that the server at http.listen serves this very store.
// readerFor loads the config file at path and opens its API reader for the
// command named cmd. When it cannot, it says why and returns nil and the exit
// code to end with: exitOK for a store nothing has run on yet.
func readerFor(ctx context.Context, path, cmd string, stdout, stderr io.Writer, lookupEnv config.LookupEnv) (*apiReader, *config.Config, int) {
	cfg := loadConfig(path, stderr, lookupEnv)
	if cfg == nil {
		return nil, nil, exitFail
	}
	r, err := openAPI(ctx, cfg)
	if errors.Is(err, errNoStore) {
		fmt.Fprintln(stdout, "nothing yet:", err)
		return nil, cfg, exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "openbot %s: %v\n", cmd, err)
		return nil, cfg, exitFail
	}
	return r, cfg, exitOK
}

func openAPI(ctx context.Context, cfg *config.Config) (*apiReader, error) {
	if cfg.Store.Driver == config.StorePostgres { // no file lock: any process may read
		st, err := postgres.Open(ctx, cfg.Store.DSN, postgres.Options{MaxConns: 2})
		if err != nil {
			return nil, err
		}
		keeper, op, err := localPeople(cfg, st)
		if err != nil {
			st.Close()
			return nil, err
		}
		srv, err := admin.New(admin.Options{Store: st, People: keeper, Identity: op, IdentityName: cfg.Admin.Name})
		if err != nil {
			st.Close()
			return nil, err
		}
		return &apiReader{local: srv, closer: func() { _ = st.Close() }}, nil
	}
	if _, err := os.Stat(cfg.Store.Path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s: nothing has run with this config", errNoStore, cfg.Store.Path)
	}
	st, err := bolt.Open(cfg.Store.Path, bolt.Options{Timeout: 300 * time.Millisecond})
	if err == nil {
		keeper, op, err := localPeople(cfg, st)
		if err != nil {
			st.Close()
			return nil, err
		}
		srv, err := admin.New(admin.Options{Store: st, StorePath: cfg.Store.Path, People: keeper, Identity: op, IdentityName: cfg.Admin.Name})
		if err != nil {
			st.Close()
			return nil, err
		}
		return &apiReader{local: srv, closer: func() { _ = st.Close() }}, nil
	}
	if !errors.Is(err, bolt.ErrLocked) {
		return nil, err
	}
	if cfg.Admin.Token == "" {
		return nil, fmt.Errorf("%v: a running openbot holds it; set admin.token (the same as the server's) to read through its listener", err)
	}
	r := &apiReader{base: "http://" + dialAddr(cfg.HTTP.Listen), token: cfg.Admin.Token, closer: func() {}}
	if serr := r.servesStore(ctx, cfg.Store.Path); serr != nil {
		return nil, fmt.Errorf("%v, and %w", err, serr)
	}
	return r, nil
}

// servesStore checks, through GET /api/v1/, that the server at r.base serves
// the store file storePath (compared as absolute paths), so a command never
// reads or steers another deployment that happens to answer at http.listen.
func (r *apiReader) servesStore(ctx context.Context, storePath string) error {
	var info admin.Info
	if err := r.get(ctx, "/api/v1/", &info); err != nil {
		return fmt.Errorf("the running server: %w", err)
	}
	want, _ := filepath.Abs(storePath)
	if info.Store != want {
		return fmt.Errorf("the openbot answering at %s serves another store (%s, not %s)", r.base, info.Store, want)
	}
	return nil
}

// close releases the store file (in process). Safe to call more than once.
func (r *apiReader) close() {
	r.closer()
	r.closer = func() {}
}

// get reads path (with its query) into v; a refusal or error status is an
// error that says what to fix.
func (r *apiReader) get(ctx context.Context, path string, v any) error {
	return r.do(ctx, http.MethodGet, path, nil, v)
}

// getAll reads every page of the listing at path (its query kept, each page's
// cursor added) and returns the items in order.
func getAll[T any](ctx context.Context, r *apiReader, path string) ([]T, error) {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	var out []T
	for cursor := ""; ; {
		var p admin.Page[T]
		if err := r.get(ctx, path+sep+"cursor="+url.QueryEscape(cursor), &p); err != nil {
			return nil, err
		}
		out = append(out, p.Items...)
		if cursor = p.Next; cursor == "" || len(p.Items) == 0 {
			return out, nil
		}
	}
}

// do sends method to path with payload (nil: none) and decodes the answer into v
// as get does: the CLI's edits (openbot memory) go the same two ways as reads.
func (r *apiReader) do(ctx context.Context, method, path string, payload []byte, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	var status int
	var body io.Reader
	if r.local != nil {
		rec := &recorder{header: http.Header{}, code: http.StatusOK}
		r.local.ServeHTTP(rec, req)
		status, body = rec.code, &rec.body
	} else {
		req.Header.Set("Authorization", "Bearer "+r.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("%s did not answer: %w", r.base, err)
		}
		defer resp.Body.Close()
		status, body = resp.StatusCode, resp.Body
	}
	data, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		return err
	}
	switch status {
	case http.StatusOK:
		return json.Unmarshal(data, v)
	case http.StatusUnauthorized:
		return fmt.Errorf("%s refused admin.token: the running server has another one", r.base)
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return fmt.Errorf("%s", e.Error)
	}
	if status == http.StatusNotFound && r.local == nil {
		return fmt.Errorf("%s%s answered 404: the running server has no admin.token, so its admin endpoints are off", r.base, path)
	}
	return fmt.Errorf("%s answered %d", path, status)
}

// recorder is the http.ResponseWriter of an in-process API call.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(code int)        { r.code = code }
