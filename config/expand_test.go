package config

import "testing"

func mapEnv(m map[string]string) LookupEnv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestExpand(t *testing.T) {
	env := mapEnv(map[string]string{"KEY": "sk-1", "EMPTY": "", "URL": "http://x/v1"})
	tests := []struct{ name, in, want string }{
		{"plain", "a: b", "a: b"},
		{"set", "k: ${KEY}", "k: sk-1"},
		{"unset is empty", "k: ${NOPE}", "k: "},
		{"default when unset", "k: ${NOPE:-dflt}", "k: dflt"},
		{"default when empty", "k: ${EMPTY:-dflt}", "k: dflt"},
		{"value wins over default", "k: ${URL:-https://api.openai.com/v1}", "k: http://x/v1"},
		{"default with colon and slashes", "k: ${NOPE:-https://api.openai.com/v1}", "k: https://api.openai.com/v1"},
		{"empty default", "k: ${NOPE:-}", "k: "},
		{"two on a line", "${KEY}${KEY}", "sk-1sk-1"},
		{"lone dollar kept", "cost: $5 and $KEY", "cost: $5 and $KEY"},
		{"unterminated kept", "k: ${KEY", "k: ${KEY"},
		{"bad name kept", "k: ${1X} ${A B}", "k: ${1X} ${A B}"},
		{"nested start recovers", "${${KEY}", "${sk-1"},
		{"multi-line", "a: ${KEY}\nb: ${NOPE:-x}\n", "a: sk-1\nb: x\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Expand(tt.in, env); got != tt.want {
				t.Errorf("Expand(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestExpandNilLookup(t *testing.T) {
	if got := Expand("${A:-d}${B}", nil); got != "d" {
		t.Errorf("got %q, want %q", got, "d")
	}
}
