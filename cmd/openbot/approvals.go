package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"openbot/config"
	"openbot/core"
	"openbot/store/bolt"
)

// runApprovals is `openbot approvals list [--pending] --config FILE`: the audit of
// every question and decision (issue 7 item 6): who decided, when, through which
// account, what tool with which argument hash. It reads the store directly, or,
// while `openbot serve` holds the store, asks that server on its loopback listener.
func runApprovals(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	if len(args) == 0 || args[0] != "list" {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	fs := flag.NewFlagSet("approvals list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "config.yaml", "configuration file")
	pending := fs.Bool("pending", false, "only questions still waiting for an answer")
	if err := fs.Parse(args[1:]); err != nil {
		return exitUsage
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
	// A running server holds the store: ask it.
	url := "http://" + cfg.HTTP.Listen + "/approvals"
	if pending {
		url += "?pending=1"
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(hctx, http.MethodGet, url, nil)
	resp, rerr := http.DefaultClient.Do(req)
	if rerr != nil {
		return nil, fmt.Errorf("%v, and the running server did not answer at %s: %w", err, url, rerr)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	var qs []core.Question
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&qs); err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return qs, nil
}

// approvalsHandler serves GET /approvals[?pending=1] as JSON on the loopback
// listener, for `openbot approvals list` while serve holds the store.
func approvalsHandler(eng *core.Engine) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		qs, err := eng.Questions(r.Context(), r.URL.Query().Get("pending") != "")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if qs == nil {
			qs = []core.Question{}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(qs)
	})
}

func printQuestions(w io.Writer, qs []core.Question) {
	if len(qs) == 0 {
		fmt.Fprintln(w, "no questions")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tASKED\tBOT\tTHREAD\tWHAT\tARGS SHA-256\tDECISION\tBY\tVIA\tAT")
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
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", q.ID, q.Status, q.Created.UTC().Format(time.RFC3339),
			strings.TrimPrefix(string(q.Bot), "bot:"), q.Thread, what, hash, decision, orDash(string(q.AnsweredBy)), orDash(string(q.AnsweredVia)), at)
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
