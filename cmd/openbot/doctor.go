package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"openbot/config"
	"openbot/core"
)

// Check outcomes of `openbot doctor`, one per printed line.
const (
	checkOK    = "OK"
	checkWarn  = "WARN"
	checkFail  = "FAIL"
	checkFixed = "FIXED" // doctor --fix repaired it
)

// defaultDoctorTimeout bounds each external call of a check (one HTTP request,
// one MCP server start); --timeout changes it.
const defaultDoctorTimeout = 15 * time.Second

// checkLine is one result: what was checked, how it went, and for WARN and FAIL
// what to do about it.
type checkLine struct {
	Status string `json:"status"`        // OK, WARN or FAIL
	Name   string `json:"name"`          // "slack/acme auth", "llm/default completion"
	Detail string `json:"detail"`        // what was found
	Fix    string `json:"fix,omitempty"` // what to do, for WARN and FAIL
}

// doctor runs the checks of `openbot doctor` (DESIGN.md §10 "doctor") and
// prints each line as soon as it is known.
type doctor struct {
	cfg     *config.Config
	out     io.Writer
	client  *http.Client
	timeout time.Duration
	// timeoutSet: --timeout was given, so it bounds MCP starts too.
	timeoutSet bool
	lines      []checkLine
	json       bool // --json: one JSON document at the end instead of lines
	// fix: --fix repairs what it can (store directory, admin token in .env,
	// Telegram's webhook against the configured mode), each said as a FIXED line.
	fix     bool
	envPath string // the .env beside the config, where --fix puts a new admin token
	// storeInUse: the store's lock is held (by a running openbot, most likely).
	storeInUse bool
	// storedOwners counts the owners stored at run time (openbot owner add,
	// the first pairing), read by store when the file is free.
	storedOwners int
}

func (d *doctor) add(status, name, detail, fix string) {
	l := checkLine{Status: status, Name: name, Detail: core.Redact(detail), Fix: fix}
	if l.Status == checkOK {
		l.Fix = ""
	}
	d.lines = append(d.lines, l)
	if d.json {
		return // printed together at the end
	}
	s := fmt.Sprintf("%-4s  %s: %s", l.Status, l.Name, l.Detail)
	if l.Fix != "" && l.Status != checkOK {
		s += "\n      -> " + l.Fix
	}
	fmt.Fprintln(d.out, s)
}

func (d *doctor) failed() bool {
	for _, l := range d.lines {
		if l.Status == checkFail {
			return true
		}
	}
	return false
}

// runDoctor is `openbot doctor --config FILE [--timeout D] [--json]`: it checks every
// account, LLM profile, MCP server, the store, the HTTP listener, the admin token
// and the shell sandbox, prints one line per check (OK, WARN or FAIL, with what to
// do), and exits 1 when any check failed. It changes nothing, except that a store
// file of an older schema is upgraded as `serve` would.
func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	fs, path := configFlags("doctor", stderr)
	timeout := fs.Duration("timeout", defaultDoctorTimeout, "bound of each network call and MCP server start")
	fix := fs.Bool("fix", false, "repair what can be: create the store directory, put a new admin token into .env, set Telegram's webhook to match the configured mode")
	asJSON := fs.Bool("json", false, "print one JSON document: {\"ok\": bool, \"checks\": [{status, name, detail, fix}]}")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	d := &doctor{out: stdout, timeout: *timeout, client: &http.Client{Timeout: *timeout}, json: *asJSON,
		fix: *fix, envPath: filepath.Join(filepath.Dir(*path), ".env")}
	d.timeoutSet = flagSet(fs, "timeout")
	if d.cfg = loadConfig(*path, stderr, lookupEnv); d.cfg == nil {
		d.add(checkFail, "config", "the file has problems (listed on stderr)", "fix them, then run doctor again")
	} else {
		d.add(checkOK, "config", *path+" is valid", "")
		d.run(ctx)
	}
	if d.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			OK     bool        `json:"ok"`
			Checks []checkLine `json:"checks"`
		}{!d.failed(), d.lines})
	} else {
		n := map[string]int{}
		for _, l := range d.lines {
			n[l.Status]++
		}
		fixed := ""
		if n[checkFixed] > 0 {
			fixed = fmt.Sprintf(", %d fixed", n[checkFixed])
		}
		fmt.Fprintf(stdout, "%d ok, %d warnings, %d failures%s\n", n[checkOK], n[checkWarn], n[checkFail], fixed)
	}
	if d.failed() {
		return exitFail
	}
	return exitOK
}

// run performs every check in a fixed order: platforms, models, MCP servers,
// store, listener, admin token, sandbox.
func (d *doctor) run(ctx context.Context) {
	for i, s := range d.cfg.Slack {
		d.slack(ctx, i, s)
	}
	for i, t := range d.cfg.Telegram {
		d.telegram(ctx, i, t)
	}
	for i, f := range d.cfg.Feishu {
		d.feishu(ctx, i, f)
	}
	d.llms(ctx)
	d.mcpServers(ctx)
	d.store(ctx)
	d.people()
	d.listener()
	d.sandbox(ctx)
}

// listener checks that http.listen is free, or held by the running openbot (its
// /healthz answers with the healthHeader; or, less sure, the store is in use
// too: a WARN), and that a non-loopback listener has an admin token
// (DESIGN.md §9).
func (d *doctor) listener() {
	addr := d.cfg.HTTP.Listen
	ln, err := net.Listen("tcp", addr)
	switch {
	case err != nil && d.answersAsOpenbot(addr):
		d.add(checkOK, "http listener", addr+" is in use by the running openbot (its /healthz answered)", "")
	case err != nil && d.storeInUse:
		d.add(checkWarn, "http listener", fmt.Sprintf("%s is not free (%v); the store is in use too, so likely by the running openbot", addr, err),
			"if openbot is not running, stop what holds it or set http.listen to another address")
	case err != nil:
		d.add(checkFail, "http listener", fmt.Sprintf("%s is not free: %v", addr, err),
			"stop what holds it (a running openbot?) or set http.listen to another address")
	default:
		_ = ln.Close()
		d.add(checkOK, "http listener", addr+" is free", "")
	}
	host, _, _ := net.SplitHostPort(addr)
	loopback := host == "localhost"
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		loopback = true
	}
	vars := d.cfg.EnvVars("admin", "token")
	if d.fix && d.cfg.Admin.Token == "" && len(vars) == 1 {
		if err := addToEnvFile(d.envPath, vars[0], randomToken()); err != nil {
			d.add(checkFail, "admin token", "could not write "+d.envPath+": "+err.Error(), "set "+vars[0]+" yourself (16+ characters)")
		} else {
			d.add(checkFixed, "admin token", "a new token is "+vars[0]+" in "+d.envPath+"; restart openbot to use it", "")
		}
		return
	}
	switch {
	case d.cfg.Admin.Token != "":
		d.add(checkOK, "admin token", "set", "")
	case loopback:
		d.add(checkOK, "admin token", "not set; the listener is loopback only, admin endpoints are off", "")
	default:
		d.add(checkFail, "admin token", "not set while http.listen ("+addr+") is reachable from other hosts",
			"set admin.token: ${OPENBOT_ADMIN_TOKEN} (16+ characters), or listen on 127.0.0.1")
	}
}

// do makes one request bounded by the doctor's timeout, with body (when not nil)
// sent as JSON, and decodes a JSON answer into v. It returns the response (its
// body closed) so callers can read headers and status.
func (d *doctor) do(ctx context.Context, method, url string, header http.Header, body any, v any) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return resp, err
	}
	if v != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, v); err != nil && resp.StatusCode < 300 {
			return resp, fmt.Errorf("answer is not JSON (HTTP %d)", resp.StatusCode)
		}
	}
	return resp, nil
}

// netReason says why a request could not be made, without URLs.
func netReason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "no answer in time"
	case strings.Contains(err.Error(), "connection refused"):
		return "connection refused"
	case strings.Contains(err.Error(), "no such host"):
		return "host not found"
	}
	return core.Redact(err.Error())
}

// answersAsOpenbot reports whether GET /healthz at addr answers as openbot does
// (the healthHeader, whatever the status: a starting or degraded openbot
// answers 503). The call is bounded by the doctor's client timeout.
func (d *doctor) answersAsOpenbot(addr string) bool {
	c := d.client
	if c == nil {
		c = &http.Client{Timeout: defaultDoctorTimeout}
	}
	resp, err := c.Get("http://" + dialAddr(addr) + "/healthz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.Header.Get(healthHeader) != ""
}
