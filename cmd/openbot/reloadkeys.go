package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"openbot/config"
)

// What a reload does with a changed key.
const (
	keyApplied = "applied"
	keyRestart = "restart needed"
)

// keyChange is one configuration key a reload found changed ("limits.max_bot_hops",
// "bots[engineer].model", "telegram[team]" for an account added or removed) and
// what it did with it: keyApplied or keyRestart.
type keyChange struct {
	Key    string `json:"key"`
	Status string `json:"status"`
}

// reloadRules say what a reload does with each key, by the key's pattern
// ("bots[].shell_network": list entries by handle or name as [], map keys as
// *). The longest pattern that is a prefix of a changed key's wins. Every key of
// config.Config has a rule (TestReloadRulesCoverEveryKey): a key the reload
// does not apply is reported as needing a restart, never ignored.
var reloadRules = map[string]string{
	// Read once at start: the listener, the dashboard and API, /metrics, the
	// store, the pruner, the workspace and the shell's sandbox and network.
	"http": keyRestart, "admin": keyRestart, "metrics": keyRestart, "store": keyRestart,
	"retention": keyRestart, "workspace": keyRestart, "sandbox": keyRestart,
	"shell_limits": keyRestart, "fetch_allow_hosts": keyRestart, "console": keyRestart,
	"schedules": keyRestart, "memory": keyRestart, "alerts": keyRestart,
	// The hooks server and the engine's notify targets are built at start.
	"triggers": keyRestart, "notify": keyRestart,
	"bots[].shell_network": keyRestart, "bots[].shell_limits": keyRestart,
	// The engine's files caps and the transcriber are built at start; the
	// image caps are the agent's, which a reload swaps.
	"files": keyRestart, "files.max_image_bytes": keyApplied, "files.max_image_side": keyApplied,
	// The engine's settings (core.Engine.Reload) and the swapped agent.
	"limits": keyApplied, "llm": keyApplied, "bots": keyApplied, "default_bot": keyApplied,
	"approvers": keyApplied, "approval_timeout": keyApplied, "cost": keyApplied,
	"owners": keyApplied, "self_approve": keyApplied, "policies": keyApplied,
	"mcp_ready_timeout": keyApplied, "embeddings": keyApplied,
	// The sets a reload changes piece by piece (accountSet, mcpSet).
	"mcp_servers": keyApplied, "slack": keyApplied, "telegram": keyApplied, "feishu": keyApplied,
}

// ruleOf returns the rule for a key pattern, and false when none matches.
func ruleOf(pattern string) (string, bool) {
	for p := pattern; p != ""; {
		if s, ok := reloadRules[p]; ok {
			return s, true
		}
		if t := strings.TrimSuffix(p, "[]"); t != p {
			p = t
			continue
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return "", false
}

// configChanges lists every key that differs between two configurations, each
// with what a reload does with it, in the order of config.Config. A key no rule
// names is reported as needing a restart. Embeddings turned on or off need a
// restart (the memory's ranker is chosen at start); other embeddings changes
// are applied.
func configChanges(old, cfg *config.Config) []keyChange {
	var out []keyChange
	walkConfig(reflect.ValueOf(*old), reflect.ValueOf(*cfg), "", "", func(key, pattern string) {
		s, ok := ruleOf(pattern)
		if !ok || (strings.HasPrefix(pattern, "embeddings") && old.Embeddings.On() != cfg.Embeddings.On()) {
			s = keyRestart
		}
		out = append(out, keyChange{Key: key, Status: s})
	})
	return out
}

// keyPath is the yaml key k under parent ("" for the top level).
func keyPath(parent, k string) string {
	if parent == "" {
		return k
	}
	return parent + "." + k
}

// yamlKey is the yaml key of a config struct field; false for a field yaml
// does not read (unexported or "-").
func yamlKey(f reflect.StructField) (string, bool) {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if !f.IsExported() || name == "-" {
		return "", false
	}
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name, true
}

// walkConfig calls changed for every leaf (or whole list entry or map entry
// added or removed) that differs between a and b, two values of one type,
// named by yaml keys: key for people ("bots[engineer].model"), pattern for
// the rules ("bots[].model").
func walkConfig(a, b reflect.Value, key, pattern string, changed func(key, pattern string)) {
	switch {
	case a.Kind() == reflect.Struct:
		t := a.Type()
		for i := range t.NumField() {
			if name, ok := yamlKey(t.Field(i)); ok {
				walkConfig(a.Field(i), b.Field(i), keyPath(key, name), keyPath(pattern, name), changed)
			}
		}
	case a.Kind() == reflect.Slice && a.Type().Elem().Kind() == reflect.Struct && idField(a.Type().Elem()) != "":
		ids := func(v reflect.Value) (map[string]reflect.Value, []string) {
			m, order := map[string]reflect.Value{}, []string{}
			for i := range v.Len() {
				id := v.Index(i).FieldByName(idField(v.Type().Elem())).String()
				m[id] = v.Index(i)
				order = append(order, id)
			}
			return m, order
		}
		am, aorder := ids(a)
		bm, border := ids(b)
		for _, id := range border {
			if av, ok := am[id]; ok {
				walkConfig(av, bm[id], key+"["+id+"]", pattern+"[]", changed)
			} else {
				changed(key+"["+id+"]", pattern+"[]")
			}
		}
		for _, id := range aorder {
			if _, ok := bm[id]; !ok {
				changed(key+"["+id+"]", pattern+"[]")
			}
		}
	case a.Kind() == reflect.Map && a.Type().Key().Kind() == reflect.String:
		var keys []string
		for _, k := range a.MapKeys() {
			keys = append(keys, k.String())
		}
		for _, k := range b.MapKeys() {
			if !a.MapIndex(k).IsValid() {
				keys = append(keys, k.String())
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			kv := reflect.ValueOf(k).Convert(a.Type().Key())
			av, bv := a.MapIndex(kv), b.MapIndex(kv)
			if av.IsValid() && bv.IsValid() {
				walkConfig(av, bv, keyPath(key, k), keyPath(pattern, "*"), changed)
			} else {
				changed(keyPath(key, k), keyPath(pattern, "*"))
			}
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			changed(key, pattern)
		}
	}
}

// idField names the field that identifies an entry of a list of t: Handle
// (bots), else Name (accounts, MCP servers, schedules), else "".
func idField(t reflect.Type) string {
	for _, n := range []string{"Handle", "Name"} {
		if f, ok := t.FieldByName(n); ok && f.Type.Kind() == reflect.String {
			return n
		}
	}
	return ""
}

// configEntry is one key of the running configuration as the dashboard shows it.
type configEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// secretKey matches the keys whose values are credentials, or maps of them
// (by their ending: "bot_token", "GITHUB_TOKEN", "api_keys", "headers"; not
// "max_tokens").
var secretKey = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(api[_-]?keys?|token|secret|passw(or)?d|pwd|credentials?|dsn|encrypt_key|authorization|headers)$`)
})

// masked is what a secret shows as.
const masked = "••••••••"

// configView lists the keys of cfg that are set (not zero), in the order of
// config.Config, with every credential masked: the values of keys named like
// one or under such a map (api_key, api_keys, token, secret, dsn, headers...)
// whole, and any value of cfg.Secrets() wherever it appears in another value.
func configView(cfg *config.Config) []configEntry {
	secrets := cfg.Secrets()
	var out []configEntry
	var walk func(v reflect.Value, key string)
	walk = func(v reflect.Value, key string) {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return
			}
			v = v.Elem()
		}
		switch {
		case v.Kind() == reflect.Struct:
			t := v.Type()
			for i := range t.NumField() {
				if name, ok := yamlKey(t.Field(i)); ok {
					walk(v.Field(i), keyPath(key, name))
				}
			}
		case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
			id := idField(v.Type().Elem())
			for i := range v.Len() {
				name := fmt.Sprint(i)
				if id != "" {
					name = v.Index(i).FieldByName(id).String()
				}
				walk(v.Index(i), key+"["+name+"]")
			}
		case v.Kind() == reflect.Map:
			keys := v.MapKeys()
			slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
			for _, k := range keys {
				walk(v.MapIndex(k), keyPath(key, fmt.Sprint(k)))
			}
		default:
			if v.IsZero() {
				return
			}
			var s string
			switch x := v.Interface().(type) {
			case time.Duration:
				s = x.String()
			case string:
				s = x
			case fmt.Stringer:
				s = x.String()
			default:
				if v.Kind() == reflect.Slice {
					b, _ := json.Marshal(x)
					s = string(b)
				} else {
					s = fmt.Sprint(x)
				}
			}
			for _, seg := range strings.FieldsFunc(key, func(r rune) bool { return r == '.' || r == '[' || r == ']' }) {
				if secretKey().MatchString(seg) { // the key, or a map of them (api_keys, headers)
					s = masked
				}
			}
			for _, sec := range secrets {
				s = strings.ReplaceAll(s, sec, masked)
			}
			out = append(out, configEntry{Key: key, Value: s})
		}
	}
	walk(reflect.ValueOf(*cfg), "")
	return out
}
