package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/joho/godotenv"
	"gopkg.in/yaml.v3"
)

// Load reads the file at path and returns the configuration with ${VAR} expanded
// through lookup, defaults applied and validated, and its relative file paths
// (store.path, workspace) taken from the file's directory. A .env file beside
// it (KEY=VALUE lines, as `openbot init` writes) supplies the variables the
// environment does not set. lookup is os.LookupEnv in cmd and
// a map in tests; nil means every variable is unset. Unknown keys, values of the wrong
// type and every validation problem come back together as Errors, each with its field
// path (and the line for keys the schema does not know); the configuration is then
// still returned, as far as it decoded, so callers can add checks of their own to
// the same report. A file that cannot be read or is not YAML gives a plain error.
func Load(path string, lookup LookupEnv) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	envPath := filepath.Join(filepath.Dir(path), ".env")
	dotenv, err := godotenv.Read(envPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", envPath, err)
	}
	if len(dotenv) > 0 {
		lookup = withDotenv(lookup, dotenv)
	}
	cfg, err := Parse(data, lookup)
	if cfg != nil {
		cfg.resolvePaths(filepath.Dir(path))
	}
	return cfg, err
}

// withDotenv is lookup with the .env file's variables for those lookup lacks:
// the environment wins.
func withDotenv(lookup LookupEnv, dotenv map[string]string) LookupEnv {
	return func(name string) (string, bool) {
		if lookup != nil {
			if v, ok := lookup(name); ok {
				return v, true
			}
		}
		v, ok := dotenv[name]
		return v, ok
	}
}

// resolvePaths makes the relative file paths of the configuration (store.path,
// workspace) relative to dir, the config file's directory, so every command
// finds the same files from any working directory.
func (c *Config) resolvePaths(dir string) {
	for _, p := range []*string{&c.Store.Path, &c.Workspace} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

// Parse is Load for configuration text already in memory.
func Parse(data []byte, lookup LookupEnv) (*Config, error) {
	text := Expand(string(data), lookup)
	var cfg Config
	var p problems

	dec := yaml.NewDecoder(bytes.NewReader([]byte(text)))
	dec.KnownFields(true)
	err := dec.Decode(&cfg)
	var te *yaml.TypeError
	switch {
	case err == nil, errors.Is(err, io.EOF):
	case errors.As(err, &te):
		idx := indexLines(text)
		for _, msg := range te.Errors {
			p.errs = append(p.errs, idx.fieldError(msg))
		}
	default:
		if tabIndented(text, err) {
			return nil, fmt.Errorf("parse config: %w (YAML indents with spaces; this line has a tab)", err)
		}
		return nil, fmt.Errorf("parse config: %w", err)
	}

	// Keep the unexpanded document, so EnvVars can name a variable later.
	var src yaml.Node
	if yaml.Unmarshal(data, &src) == nil {
		cfg.source = &src
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		p.errs = append(p.errs, err.(Errors)...)
	}
	cfg.nameUnsetVars(p.errs, lookup)
	if err := p.err(); err != nil {
		return &cfg, err
	}
	return &cfg, nil
}

// lineIndex maps source lines to field paths so that yaml's "line N: ..." decode
// errors can be reported at a field path.
type lineIndex map[int][]lineEntry

type lineEntry struct {
	path  string
	key   string // set for mapping keys
	isKey bool
}

func indexLines(text string) lineIndex {
	idx := lineIndex{}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(text), &root); err != nil {
		return idx
	}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				child := k.Value
				if path != "" {
					child = path + "." + k.Value
				}
				idx[k.Line] = append(idx[k.Line], lineEntry{path: child, key: k.Value, isKey: true})
				walk(v, child)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		case yaml.ScalarNode, yaml.AliasNode:
			idx[n.Line] = append(idx[n.Line], lineEntry{path: path})
		}
		if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
			idx[n.Line] = append(idx[n.Line], lineEntry{path: path})
		}
	}
	walk(&root, "")
	return idx
}

var (
	lineRe    = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownRe = regexp.MustCompile(`^field (\S+) not found in type (\S+)$`)
	convertRe = regexp.MustCompile("^cannot unmarshal !!(\\w+) `(.*)` into (\\S+)$")
)

// fieldError turns one yaml.TypeError line into a FieldError with a path.
func (idx lineIndex) fieldError(msg string) FieldError {
	m := lineRe.FindStringSubmatch(msg)
	if m == nil {
		return FieldError{Msg: msg}
	}
	line, _ := strconv.Atoi(m[1])
	body := m[2]
	if u := unknownRe.FindStringSubmatch(body); u != nil {
		path := u[1]
		for _, e := range idx[line] {
			if e.isKey && e.key == u[1] {
				path = e.path
				break
			}
		}
		if k := suggestKey(u[2], u[1]); k != "" {
			return FieldError{Path: path, Msg: fmt.Sprintf("unknown key %q (line %d; did you mean %q?)", u[1], line, k)}
		}
		return FieldError{Path: path, Msg: fmt.Sprintf("unknown key %q (line %d)", u[1], line)}
	}
	path := ""
	for _, e := range idx[line] {
		if !e.isKey {
			path = e.path
			break
		}
	}
	if c := convertRe.FindStringSubmatch(body); c != nil {
		body = fmt.Sprintf("cannot use %s %q as %s", c[1], c[2], friendlyType(c[3]))
	}
	return FieldError{Path: path, Msg: fmt.Sprintf("%s (line %d)", body, line)}
}

func friendlyType(t string) string {
	switch {
	case t == "time.Duration":
		return "a duration such as \"10m\""
	case strings.HasPrefix(t, "int"):
		return "an integer"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "config."):
		return "a mapping"
	}
	return t
}

// tabIndented reports whether err is yaml's complaint about a character that
// cannot start a token on a line of text indented with a tab.
func tabIndented(text string, err error) bool {
	m := lineRe.FindStringSubmatch(strings.TrimPrefix(err.Error(), "yaml: "))
	if m == nil || !strings.Contains(m[2], "cannot start any token") {
		return false
	}
	n, _ := strconv.Atoi(m[1])
	lines := strings.Split(text, "\n")
	if n < 1 || n > len(lines) {
		return false
	}
	line := lines[n-1]
	return strings.Contains(line[:len(line)-len(strings.TrimLeft(line, " \t"))], "\t")
}
