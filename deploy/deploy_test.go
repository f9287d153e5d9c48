// Package deploy_test checks the deployment material in deploy/ and docs/DEPLOY.md (DESIGN.md §7
// "PostgreSQL for more than one process", §10 "Operating it"): the compose
// config is a valid openbot config with every variable it needs supplied by
// the compose file, the compose file runs PostgreSQL and two openbot
// processes with distinct process ids, the systemd unit stops and sandboxes
// as openbot needs, and the deployment guide names only commands that exist.
// It has no other files: deploy/ holds no Go code, only what these tests read.
package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"openbot/config"
)

// shutdownBound mirrors cmd/openbot/wire.go's shutdownBound (unexported in
// package main): the most a clean shutdown takes. Container and unit stop
// timeouts must exceed it.
const shutdownBound = 15 * time.Second

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)

// composeFile is the part of docker-compose.yml these tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Hostname        string                       `yaml:"hostname"`
	Restart         string                       `yaml:"restart"`
	Environment     map[string]string            `yaml:"environment"`
	EnvFile         string                       `yaml:"env_file"`
	DependsOn       map[string]map[string]string `yaml:"depends_on"`
	Volumes         []string                     `yaml:"volumes"`
	Entrypoint      []string                     `yaml:"entrypoint"`
	SecurityOpt     []string                     `yaml:"security_opt"`
	StopGracePeriod string                       `yaml:"stop_grace_period"`
	Healthcheck     struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile(fromRoot("deploy/docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("deploy/docker-compose.yml: %v", err)
	}
	return c
}

// openbotServices are the compose services built from deploy/Dockerfile.
func openbotServices(c composeFile) map[string]composeService {
	out := map[string]composeService{}
	for name, s := range c.Services {
		if s.Build.Dockerfile == "deploy/Dockerfile" {
			out[name] = s
		}
	}
	return out
}

// envFileKeys are the KEY= names of an env file (commented-out ones too: the
// operator may set them).
func envFileKeys(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(fromRoot(path))
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if k, _, ok := strings.Cut(line, "="); ok && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`).MatchString(k) {
			keys[k] = true
		}
	}
	return keys
}

func TestDeployConfigValid(t *testing.T) {
	data, err := os.ReadFile(fromRoot("deploy/config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, m := range envRef.FindAllStringSubmatch(string(data), -1) {
		if m[2] == "" { // variables with a default keep it
			env[m[1]] = "dummy-value-0123456789"
		}
	}
	env["DATABASE_URL"] = "postgres://openbot:pw@postgres:5432/openbot"
	env["OPENBOT_PROCESS_ID"] = "openbot-1"
	env["OPENBOT_PUBLIC_URL"] = "https://bots.example.com"
	env["TELEGRAM_ENGINEER_TOKEN"] = "123456:abcdef"
	cfg, err := config.Parse(data, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("deploy/config.yaml does not load: %v", err)
	}
	if cfg.Store.Driver != config.StorePostgres || cfg.Store.DSN != env["DATABASE_URL"] {
		t.Errorf("store = %+v, want driver postgres with dsn ${DATABASE_URL}", cfg.Store)
	}
	if !strings.Contains(cfg.Store.Path, "/openbot-1/") {
		t.Errorf("store.path %q: want one directory per process (pid file, send_file staging)", cfg.Store.Path)
	}
	if !filepath.IsAbs(cfg.Workspace) || !filepath.IsAbs(cfg.Store.Path) {
		t.Errorf("workspace %q and store.path %q must be absolute: they sit on the shared volume", cfg.Workspace, cfg.Store.Path)
	}
	if !strings.HasPrefix(cfg.HTTP.Listen, "0.0.0.0:") {
		t.Errorf("http.listen = %q: the proxy and healthcheck reach it from outside the loopback", cfg.HTTP.Listen)
	}
	// Tool names: the built-ins the example config documents.
	example, err := os.ReadFile(fromRoot("config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range cfg.Bots {
		for _, tool := range b.Tools {
			if !regexp.MustCompile(`(?m)^#\s+(\S+, )*` + regexp.QuoteMeta(tool) + `\b`).Match(example) {
				t.Errorf("bot %s: tool %q is not a built-in tool documented in config.example.yaml", b.Handle, tool)
			}
		}
	}

	// Every variable the config needs without a default comes from the compose
	// file: a service's environment or the env file it reads.
	c := readCompose(t)
	for name, s := range openbotServices(c) {
		have := envFileKeys(t, "deploy/env.example")
		for k := range s.Environment {
			have[k] = true
		}
		for _, m := range envRef.FindAllStringSubmatch(string(data), -1) {
			if m[2] == "" && !have[m[1]] {
				t.Errorf("service %s: ${%s} of deploy/config.yaml is set neither in its environment nor in deploy/env.example", name, m[1])
			}
		}
	}
}

func TestDeployCompose(t *testing.T) {
	c := readCompose(t)
	pg, ok := c.Services["postgres"]
	if !ok {
		t.Fatal("no postgres service")
	}
	if !strings.HasPrefix(pg.Image, "postgres:16") {
		t.Errorf("postgres image = %q, want the official postgres:16", pg.Image)
	}
	if !strings.Contains(strings.Join(pg.Healthcheck.Test, " "), "pg_isready") {
		t.Errorf("postgres healthcheck = %q, want pg_isready", pg.Healthcheck.Test)
	}
	if len(pg.Volumes) == 0 || !namedVolume(c, pg.Volumes[0]) {
		t.Errorf("postgres volumes = %q, want a named volume", pg.Volumes)
	}

	bots := openbotServices(c)
	if len(bots) != 2 {
		t.Fatalf("%d openbot services built from deploy/Dockerfile, want 2", len(bots))
	}
	if _, err := os.Stat(fromRoot("deploy/Dockerfile")); err != nil {
		t.Fatal(err)
	}
	ids, hosts, dsns := map[string]bool{}, map[string]bool{}, map[string]bool{}
	if !strings.Contains(readFile(t, "cmd/openbot/wire.go"), "const shutdownBound = 15 * time.Second") {
		t.Error("cmd/openbot/wire.go's shutdownBound changed: update shutdownBound here and the stop timeouts in deploy/")
	}
	for name, s := range bots {
		id := s.Environment["OPENBOT_PROCESS_ID"]
		if id == "" || ids[id] {
			t.Errorf("service %s: OPENBOT_PROCESS_ID %q empty or shared with another service", name, id)
		}
		ids[id] = true
		if s.Hostname == "" || hosts[s.Hostname] {
			t.Errorf("service %s: hostname %q empty or shared (the default process id starts with it)", name, s.Hostname)
		}
		hosts[s.Hostname] = true
		dsns[s.Environment["DATABASE_URL"]] = true
		if !strings.HasPrefix(s.Environment["DATABASE_URL"], "postgres://") || !strings.Contains(s.Environment["DATABASE_URL"], "@postgres:5432/") {
			t.Errorf("service %s: DATABASE_URL = %q, want the postgres service", name, s.Environment["DATABASE_URL"])
		}
		if s.DependsOn["postgres"]["condition"] != "service_healthy" {
			t.Errorf("service %s: depends_on = %v, want postgres service_healthy", name, s.DependsOn)
		}
		if s.Restart == "" || s.Restart == "no" {
			t.Errorf("service %s: restart = %q", name, s.Restart)
		}
		if !slices.Contains(s.Volumes, "./config.yaml:/etc/openbot/config.yaml:ro") {
			t.Errorf("service %s: volumes %q lack the config mounted read-only", name, s.Volumes)
		}
		if !strings.Contains(strings.Join(s.Entrypoint, " "), "serve --config /etc/openbot/config.yaml") {
			t.Errorf("service %s: entrypoint %q does not serve the mounted config", name, s.Entrypoint)
		}
		if s.EnvFile == "" {
			t.Errorf("service %s: no env_file for the secrets", name)
		}
		hc := strings.Join(s.Healthcheck.Test, " ")
		if !strings.Contains(hc, "127.0.0.1:8080/healthz") {
			t.Errorf("service %s: healthcheck %q, want GET /healthz on the listener (config http.listen :8080)", name, hc)
		}
		if d, err := time.ParseDuration(s.StopGracePeriod); err != nil || d <= shutdownBound {
			t.Errorf("service %s: stop_grace_period %q, want longer than openbot's %s shutdown", name, s.StopGracePeriod, shutdownBound)
		}
		for _, opt := range []string{"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"} {
			if !slices.Contains(s.SecurityOpt, opt) {
				t.Errorf("service %s: security_opt lacks %s, which bubblewrap needs in a container", name, opt)
			}
		}
	}
	if len(dsns) != 1 {
		t.Errorf("openbot services use %d different DATABASE_URLs, want one shared database", len(dsns))
	}
	if _, err := os.Stat(fromRoot("deploy/Caddyfile")); err != nil {
		t.Errorf("reverse proxy config: %v", err)
	}
}

// namedVolume reports whether a "source:target" mount names a top-level volume.
func namedVolume(c composeFile, mount string) bool {
	src, _, _ := strings.Cut(mount, ":")
	_, ok := c.Volumes[src]
	return ok
}

// fromRoot is path, given from the module root (as messages name files), from
// this package's directory, where go test runs it.
func fromRoot(path string) string { return filepath.Join("..", path) }

// readFile is the text of the file at path from the module root.
func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(fromRoot(path))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestDeploySystemdUnit(t *testing.T) {
	unit := map[string][]string{}
	for _, line := range strings.Split(readFile(t, "deploy/openbot.service"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("unit line %q is not Key=Value", line)
			continue
		}
		unit[k] = append(unit[k], v)
	}
	one := func(k string) string {
		if len(unit[k]) != 1 {
			t.Errorf("%s set %d times, want once", k, len(unit[k]))
			return ""
		}
		return unit[k][0]
	}
	if typ := one("Type"); typ != "simple" && typ != "exec" {
		t.Errorf("Type=%s: openbot does not speak sd_notify", typ)
	}
	if one("User") != "openbot" || one("KillSignal") != "SIGTERM" || one("Restart") != "on-failure" {
		t.Errorf("User/KillSignal/Restart = %v %v %v", unit["User"], unit["KillSignal"], unit["Restart"])
	}
	if d, err := time.ParseDuration(one("TimeoutStopSec")); err != nil || d <= shutdownBound {
		t.Errorf("TimeoutStopSec=%v, want longer than openbot's %s shutdown", unit["TimeoutStopSec"], shutdownBound)
	}
	if !strings.Contains(one("ExecStart"), "openbot serve --config ") || one("EnvironmentFile") == "" {
		t.Errorf("ExecStart=%v EnvironmentFile=%v", unit["ExecStart"], unit["EnvironmentFile"])
	}
	// bubblewrap creates these namespaces (agents/tools/sandbox.go: --unshare-all).
	ns := strings.Fields(one("RestrictNamespaces"))
	for _, want := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		if !slices.Contains(ns, want) {
			t.Errorf("RestrictNamespaces=%v forbids %s, which the shell sandbox needs", ns, want)
		}
	}
	for _, bad := range []string{"ProtectKernelTunables", "ProtectKernelLogs", "ProtectProc", "ProcSubset", "ProtectHostname"} {
		if len(unit[bad]) > 0 {
			t.Errorf("%s is set: it stops bubblewrap mounting /proc or setting its hostname", bad)
		}
	}
}

// TestDeployDocCommands checks that every `openbot ...` command docs/DEPLOY.md
// shows is one the binary's usage lists (cmd/openbot/main.go), subcommand and
// flags included.
func TestDeployDocCommands(t *testing.T) {
	main := readFile(t, "cmd/openbot/main.go")
	start := strings.Index(main, "const usage = `")
	if start < 0 {
		t.Fatal("cmd/openbot/main.go: no usage text")
	}
	usage := main[start+len("const usage = `"):]
	usage = usage[:strings.Index(usage, "`")]
	var lines [][]string // each usage line's words from "openbot" on
	for _, l := range strings.Split(usage, "\n") {
		if i := strings.Index(l, "openbot "); i >= 0 {
			lines = append(lines, strings.Fields(l[i:]))
		}
	}
	doc := readFile(t, "docs/DEPLOY.md")
	cmdRef := regexp.MustCompile("openbot ([a-z][a-z-]*)((?: [a-z][a-z-]*)?)((?: --[a-z-]+)*)")
	// Commands are quoted in backticks or shown in code blocks.
	spans := regexp.MustCompile("(?s)```.*?```|`[^`\n]+`").FindAllString(doc, -1)
	if len(spans) == 0 {
		t.Fatal("docs/DEPLOY.md shows no commands")
	}
	for _, span := range spans {
		for _, m := range cmdRef.FindAllStringSubmatch(span, -1) {
			if !usageHas(lines, m[1], strings.TrimSpace(m[2]), strings.Fields(m[3])) {
				t.Errorf("docs/DEPLOY.md: %q is not a command in openbot's usage", m[0])
			}
		}
	}
}

// usageHas reports whether some usage line starts with openbot cmd, takes sub
// as its second word when that line has subcommands, and lists every flag.
func usageHas(lines [][]string, cmd, sub string, flags []string) bool {
	for _, l := range lines {
		if len(l) < 2 || l[1] != cmd {
			continue
		}
		text := strings.Join(l, " ")
		if sub != "" && len(l) > 2 && !strings.HasPrefix(l[2], "[") && !strings.HasPrefix(l[2], "--") &&
			strings.ToUpper(l[2]) != l[2] && !slices.Contains(strings.Split(l[2], "|"), sub) {
			continue
		}
		ok := true
		for _, f := range flags {
			if !strings.Contains(text, f) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// TestDeployDockerfile checks the image: a static build of the binary, the
// packages the runtime needs (TLS roots, the shell sandbox, the healthcheck's
// curl) and a non-root user.
func TestDeployDockerfile(t *testing.T) {
	df := readFile(t, "deploy/Dockerfile")
	for _, want := range []string{
		"CGO_ENABLED=0 go build", "./cmd/openbot", "ca-certificates", "bubblewrap", "curl",
		"USER openbot", `CMD ["serve", "--config", "/etc/openbot/config.yaml"]`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("deploy/Dockerfile lacks %q", want)
		}
	}
	if n := strings.Count(df, "\nFROM "); n < 2 {
		t.Errorf("deploy/Dockerfile has %d stages, want a build and a runtime stage", n)
	}
}
