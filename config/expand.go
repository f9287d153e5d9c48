package config

import "strings"

// LookupEnv finds an environment variable, with the signature of os.LookupEnv.
// Package config never reads the process environment itself; cmd passes os.LookupEnv.
type LookupEnv func(key string) (string, bool)

// Expand replaces ${VAR} with the variable's value ("" when unset) and
// ${VAR:-default} with the value, or default when the variable is unset or empty, in
// raw configuration text. VAR is [A-Za-z_][A-Za-z0-9_]*; the default runs to the first
// "}". Anything else, including a lone "$" or a malformed "${", is kept as written.
// Expansion happens before YAML parsing, so a value containing YAML syntax (": ",
// " #", quotes) must be quoted suitably in the file.
func Expand(text string, lookup LookupEnv) string {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	var b strings.Builder
	b.Grow(len(text))
	for {
		i := strings.Index(text, "${")
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		b.WriteString(text[:i])
		rest := text[i+2:]
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			b.WriteString(text[i:])
			return b.String()
		}
		body := rest[:end]
		name, def, hasDef := strings.Cut(body, ":-")
		if !validVarName(name) {
			b.WriteString("${")
			text = rest
			continue
		}
		val, ok := lookup(name)
		if hasDef && (!ok || val == "") {
			val = def
		}
		b.WriteString(val)
		text = rest[end+1:]
	}
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
