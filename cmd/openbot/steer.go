package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"openbot/config"
)

// Steering from a terminal (DESIGN.md §10): `openbot cancel RUN`, `openbot stop
// THREAD --bot B`, `openbot pause BOT` and `openbot resume BOT` call the running
// server's console API with admin.token, so the engine that runs the work is the
// one that stops it; the activity log names admin.identity. The server must
// serve this config's store (checked first, as the inspect commands do), so a
// command never steers another deployment answering at http.listen.

// steerTimeout bounds one steering request.
const steerTimeout = 10 * time.Second

// runSteer is `openbot cancel|stop|pause|resume`.
func runSteer(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	fs, cfgPath := configFlags(cmd, stderr)
	bot := ""
	if cmd == "stop" {
		fs.StringVar(&bot, "bot", "", "the bot whose work in the thread stops (required)")
	}
	if err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	usageOf := map[string]string{"cancel": "openbot cancel RUN", "stop": "openbot stop THREAD --bot B", "pause": "openbot pause BOT", "resume": "openbot resume BOT"}
	if fs.NArg() != 1 || cmd == "stop" && bot == "" {
		fmt.Fprintf(stderr, "usage: %s [--config FILE]\n", usageOf[cmd])
		return exitUsage
	}
	arg := fs.Arg(0)
	var path, body string
	switch cmd {
	case "cancel", "stop":
		id, err := strconv.ParseUint(arg, 10, 64)
		if err != nil || id == 0 {
			fmt.Fprintf(stderr, "openbot %s: %q is not a number\n", cmd, arg)
			return exitUsage
		}
		path = fmt.Sprintf("/api/v1/runs/%d/cancel", id)
		if cmd == "stop" {
			path = fmt.Sprintf("/api/v1/threads/%d/stop", id)
			b, _ := json.Marshal(map[string]string{"bot": strings.TrimPrefix(bot, "@")})
			body = string(b)
		}
	default:
		path = "/api/v1/bots/" + url.PathEscape(strings.ToLower(strings.TrimPrefix(arg, "@"))) + "/" + cmd
	}
	cfg := loadConfig(*cfgPath, stderr, lookupEnv)
	if cfg == nil {
		return exitFail
	}
	if cfg.Admin.Token == "" {
		fmt.Fprintf(stderr, "openbot %s: set admin.token (the same as the running server's): steering goes through its API\n", cmd)
		return exitFail
	}
	base := "http://" + dialAddr(cfg.HTTP.Listen)
	api := &apiReader{base: base, token: cfg.Admin.Token, closer: func() {}}
	if err := api.servesStore(ctx, cfg.Store.Path); err != nil {
		fmt.Fprintf(stderr, "openbot %s: nothing changed: %v\n", cmd, err)
		return exitFail
	}
	out, err := steer(ctx, base, cfg.Admin.Token, path, body)
	if err != nil {
		fmt.Fprintf(stderr, "openbot %s: %v\n", cmd, err)
		return exitFail
	}
	switch cmd {
	case "cancel":
		fmt.Fprintf(stdout, "run %s cancelled\n", arg)
	case "stop":
		fmt.Fprintf(stdout, "@%s stopped in thread %s: %s\n", strings.TrimPrefix(bot, "@"), arg, strings.TrimSpace(out))
	default:
		fmt.Fprintf(stdout, "@%s %sd\n", strings.TrimPrefix(arg, "@"), cmd)
	}
	return exitOK
}

// steer POSTs body to path on the running server and returns the answer; an
// error status becomes an error saying what to fix.
func steer(ctx context.Context, base, token, path, body string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, steerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("no openbot answered at %s (is serve running?): %w", base, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusOK:
		return string(data), nil
	case http.StatusUnauthorized:
		return "", fmt.Errorf("%s refused admin.token: the running server has another one", base)
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return "", fmt.Errorf("%s", e.Error)
	}
	return "", fmt.Errorf("%s answered %d", path, resp.StatusCode)
}
