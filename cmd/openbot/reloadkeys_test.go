package main

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"openbot/config"
)

// TestReloadRulesCoverEveryKey: every key of config.Config, down to the
// leaves, has a rule saying whether a reload applies it or needs a restart: a
// new key without one fails here rather than being reported by default.
func TestReloadRulesCoverEveryKey(t *testing.T) {
	var walk func(tp reflect.Type, pattern string)
	n := 0
	walk = func(tp reflect.Type, pattern string) {
		join := func(k string) string {
			if pattern == "" {
				return k
			}
			return pattern + "." + k
		}
		for tp.Kind() == reflect.Pointer {
			tp = tp.Elem()
		}
		switch {
		case tp.Kind() == reflect.Struct && tp != reflect.TypeOf(time.Time{}):
			for i := range tp.NumField() {
				f := tp.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				if f.IsExported() && name != "-" {
					walk(f.Type, join(name))
				}
			}
		case tp.Kind() == reflect.Slice && tp.Elem().Kind() == reflect.Struct && idField(tp.Elem()) != "":
			walk(tp.Elem(), pattern+"[]")
		case tp.Kind() == reflect.Map && tp.Key().Kind() == reflect.String:
			walk(tp.Elem(), join("*"))
		default:
			n++
			if _, ok := ruleOf(pattern); !ok {
				t.Errorf("config key %s has no reload rule (reloadRules): applied or restart needed?", pattern)
			}
		}
	}
	walk(reflect.TypeOf(config.Config{}), "")
	if n < 100 {
		t.Fatalf("walked %d keys of config.Config, want them all (over 100)", n)
	}
}

// TestReloadReportsEveryExampleKey walks every key set in config.example.yaml,
// changes its value alone and checks the reload's report names the change as
// applied or restart needed, never "nothing changed"; the keys the reload used
// to pass over in silence are reported as they are handled.
func TestReloadReportsEveryExampleKey(t *testing.T) {
	src, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	decode := func() *config.Config {
		t.Helper()
		b, err := yaml.Marshal(&doc)
		if err != nil {
			t.Fatal(err)
		}
		var c config.Config
		if err := yaml.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	old := decode()
	walked := 0
	var visit func(n *yaml.Node, path string)
	visit = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if path != "" {
					k = path + "." + k
				}
				visit(n.Content[i+1], k)
			}
		case yaml.SequenceNode:
			if len(n.Content) > 0 && n.Content[0].Kind == yaml.MappingNode {
				for i, e := range n.Content {
					visit(e, path+"["+strconv.Itoa(i)+"]")
				}
				return
			}
			was := n.Content
			n.Content = append(append([]*yaml.Node{}, was...), &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "added"})
			check(t, old, decode(), path)
			n.Content = was
			walked++
		case yaml.ScalarNode:
			if n.Tag == "!!null" {
				return
			}
			was, tag := n.Value, n.Tag
			n.Value = mutated(n)
			check(t, old, decode(), path)
			n.Value, n.Tag = was, tag
			walked++
		}
	}
	visit(doc.Content[0], "")
	if walked < 60 {
		t.Fatalf("changed %d keys of config.example.yaml, want every one set there (over 60)", walked)
	}

	// The keys a reload used to report as "nothing changed" or leave unnamed.
	for key, want := range map[string]string{
		"metrics.enabled": keyRestart, "metrics.auth": keyRestart,
		"files.max_file_bytes": keyRestart, "files.max_message_bytes": keyRestart,
		"files.transcription.model": keyRestart, "memory.reflection_delay": keyRestart,
		"memory.flush_timeout": keyRestart, "mcp_ready_timeout": keyApplied,
		"files.max_image_bytes": keyApplied, "files.max_image_side": keyApplied,
		"limits.max_bot_hops": keyApplied, "bots[engineer].model": keyApplied,
		"bots[engineer].shell_network": keyRestart, "telegram[team].token": keyApplied,
		"console[local].enabled": keyRestart, "schedules[daily].cron": keyRestart,
	} {
		pattern := key
		for _, l := range []string{"engineer", "team", "local", "daily"} {
			pattern = strings.ReplaceAll(pattern, "["+l+"]", "[]")
		}
		if got, ok := ruleOf(pattern); !ok || got != want {
			t.Errorf("%s: %q, want %q", key, got, want)
		}
	}
}

// check fails unless the change at path is reported, each key of the report
// with an explicit rule.
func check(t *testing.T, old, cfg *config.Config, path string) {
	t.Helper()
	changes := configChanges(old, cfg)
	if len(changes) == 0 {
		t.Errorf("a change of %s is reported as nothing changed", path)
	}
	for _, c := range changes {
		if c.Status != keyApplied && c.Status != keyRestart {
			t.Errorf("%s: status %q", c.Key, c.Status)
		}
	}
}

// mutated is another value of the scalar's type.
func mutated(n *yaml.Node) string {
	switch n.Tag {
	case "!!bool":
		return strconv.FormatBool(n.Value != "true")
	case "!!int", "!!float":
		return n.Value + "1"
	}
	if d, err := time.ParseDuration(n.Value); err == nil {
		return (d + time.Second).String()
	}
	return n.Value + "x"
}

// TestConfigViewMasksSecrets: the dashboard's config view shows no
// credential, short ones included: keys, key maps, headers, tokens, the DSN,
// an MCP server's token in its env, and a secret inside another value.
func TestConfigViewMasksSecrets(t *testing.T) {
	cfg := &config.Config{
		Admin: config.Admin{Token: "admin-token-0123456789"},
		Store: config.Store{DSN: "postgres://u:pw@db/openbot"},
		LLM: map[string]config.LLMProfile{"default": {BaseURL: "https://llm.example/v1?key=sk-long-secret-1", APIKey: "sk-long-secret-1",
			APIKeys: map[string]string{"spare": "k2"}, Headers: map[string]string{"X-Api-Key": "k3"}, Model: "m"}},
		Telegram:   []config.Telegram{{Name: "team", Token: "1:t"}},
		MCPServers: []config.MCPServer{{Name: "gh", Command: "gh-mcp", Env: map[string]string{"GITHUB_TOKEN": "g1", "LOG": "debug"}}},
	}
	view := configView(cfg)
	seen := map[string]string{}
	for _, e := range view {
		seen[e.Key] = e.Value
		for _, secret := range []string{"admin-token-0123456789", "pw@", "sk-long-secret-1", "k2", "k3", "1:t", "g1"} {
			if strings.Contains(e.Value, secret) {
				t.Errorf("%s = %q shows a secret", e.Key, e.Value)
			}
		}
	}
	if seen["mcp_servers[gh].env.LOG"] != "debug" || seen["llm.default.model"] != "m" || seen["llm.default.base_url"] != "https://llm.example/v1?key="+masked {
		t.Errorf("the view hides what is not secret: %v", seen)
	}
}
