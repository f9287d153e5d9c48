package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"openbot/config"
	"openbot/core"
	"openbot/store/bolt"
)

// runApprovals is `openbot approvals list [--pending] --config FILE`: the audit of
// every question and decision (DESIGN.md §5): who decided, when, through which
// account, what tool with which argument hash, and what became of an approved
// call (ran, or not run and why). It reads the store directly, or, while
// `openbot serve` holds the store, asks that server on its listener with the
// admin token (admin.token of the same config).
func runApprovals(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	if len(args) == 0 || args[0] != "list" {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	fs, path := configFlags("approvals list", stderr)
	pending := fs.Bool("pending", false, "only questions still waiting for an answer")
	if code, done := parseFlags(fs, args[1:], stderr); done {
		return code
	}
	cfg := loadConfig(*path, stderr, lookupEnv)
	if cfg == nil {
		return exitFail
	}
	qs, err := readQuestions(ctx, cfg, *pending)
	if err != nil {
		fmt.Fprintf(stderr, "openbot: approvals: %v\n", err)
		return exitFail
	}
	printQuestions(stdout, qs)
	return exitOK
}

func readQuestions(ctx context.Context, cfg *config.Config, pending bool) ([]core.Question, error) {
	if cfg.Store.Driver == config.StorePostgres { // no file lock: read the database directly
		return viewPostgres(ctx, cfg, func(tx core.ReadTx) ([]core.Question, error) { return tx.Questions(pending, 0) })
	}
	if _, err := os.Stat(cfg.Store.Path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil // nothing has run with this store yet; do not create one
	}
	st, err := bolt.Open(cfg.Store.Path, bolt.Options{Timeout: 300 * time.Millisecond})
	if err == nil {
		defer st.Close()
		var qs []core.Question
		err = st.View(ctx, func(tx core.ReadTx) error {
			var err error
			qs, err = tx.Questions(pending, 0)
			return err
		})
		return qs, err
	}
	if !errors.Is(err, bolt.ErrLocked) {
		return nil, err
	}
	// A running server holds the store: ask it, with the admin token.
	if cfg.Admin.Token == "" {
		return nil, fmt.Errorf("%v: a running openbot holds it; set admin.token (the same as the server's) to read the audit through its listener", err)
	}
	url := "http://" + dialAddr(cfg.HTTP.Listen) + "/approvals"
	if pending {
		url += "?pending=1"
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(hctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+cfg.Admin.Token)
	resp, rerr := http.DefaultClient.Do(req)
	if rerr != nil {
		return nil, fmt.Errorf("%v, and the running server did not answer at %s: %w", err, url, rerr)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		return nil, fmt.Errorf("%s refused admin.token: the running server has another one", url)
	case http.StatusNotFound:
		return nil, fmt.Errorf("%s answered 404: the running server has no admin.token, so its admin endpoints are off", url)
	default:
		return nil, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	var body approvalsBody
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&body); err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	// The listener may belong to another openbot: only trust it for this store.
	want, _ := filepath.Abs(cfg.Store.Path)
	if body.Store != want {
		return nil, fmt.Errorf("%v, and the openbot answering at %s serves another store (%s)", err, url, body.Store)
	}
	return body.Questions, nil
}

// dialAddr is the address to reach a listener on this host: an empty or
// unspecified host (":8080", "0.0.0.0:8080", "[::]:8080") becomes loopback.
func dialAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// approvalsBody is what GET /approvals answers: the store it reads and its
// questions, without their button tokens.
type approvalsBody struct {
	Store     string          `json:"store"`
	Questions []core.Question `json:"questions"`
}

// approvalsHandler serves GET /approvals[?pending=1] as JSON, for `openbot
// approvals list` while serve holds the store. serve mounts it behind the
// admin bearer token (web.Dashboard.Bearer); button tokens are left out, and a
// store failure is logged and answered with a bare 500.
func approvalsHandler(eng *core.Engine, storePath string, log *slog.Logger) http.Handler {
	abs, _ := filepath.Abs(storePath)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		qs, err := eng.Questions(r.Context(), r.URL.Query().Get("pending") != "")
		if err != nil {
			log.Error("approvals endpoint", "err", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		for i := range qs {
			qs[i].Token = ""
		}
		if qs == nil {
			qs = []core.Question{}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(approvalsBody{Store: abs, Questions: qs})
	})
}

func printQuestions(w io.Writer, qs []core.Question) {
	if len(qs) == 0 {
		fmt.Fprintln(w, "no questions")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tASKED\tBOT\tTHREAD\tWHAT\tARGS SHA-256\tDECISION\tBY\tVIA\tAT\tOUTCOME")
	for _, q := range qs {
		what := q.Tool
		if q.Kind == core.QuestionAsk {
			what = "ask: " + firstRunes(q.Text, 40)
		}
		hash, at := "-", "-"
		if q.ArgsHash != "" {
			hash = q.ArgsHash[:min(16, len(q.ArgsHash))]
		}
		if !q.AnsweredAt.IsZero() {
			at = q.AnsweredAt.UTC().Format(time.RFC3339)
		}
		decision := q.Decision()
		if decision == "" {
			decision = "waiting until " + q.Expires.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", q.ID, status(q), q.Created.UTC().Format(time.RFC3339),
			strings.TrimPrefix(string(q.Bot), "bot:"), q.Thread, what, hash, decision, orDash(string(q.AnsweredBy)), orDash(string(q.AnsweredVia)), at,
			orDash(q.Outcome))
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func firstRunes(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// status is approved or rejected for a decided approval, else the stored status.
func status(q core.Question) string {
	if q.Kind == core.QuestionApproval && q.Status == core.QuestionAnswered {
		if q.Approved() {
			return "approved"
		}
		return "rejected"
	}
	return string(q.Status)
}
