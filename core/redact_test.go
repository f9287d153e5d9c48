package core

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"},
		{"https://user:pass@llm.internal/v1", "https://[redacted]@llm.internal/v1"},
		{"https://tok@github.com/x", "https://[redacted]@github.com/x"},
		{`Post "http://u:***@127.0.0.1:99/v1?api-key=SECRET/chat/completions": dial tcp 127.0.0.1:99: connect: connection refused`,
			`Post "http://[redacted]@127.0.0.1:99/v1?api-key=[redacted]": dial tcp 127.0.0.1:99: connect: connection refused`},
		{"https://h/x?a=1&access_token=XYZ&b=2", "https://h/x?a=1&access_token=[redacted]&b=2"},
		{"https://h/x?Subscription-Key=XYZ#frag", "https://h/x?Subscription-Key=[redacted]#frag"},
		{"https://h/x?sig=abc&monkey=banana", "https://h/x?sig=[redacted]&monkey=banana"},
		{"bad request: password=hunter2 given", "bad request: password=[redacted] given"},
		{"https://api.telegram.org/bot123456:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage", "https://api.telegram.org/bot[redacted]/sendMessage"},
		{"no secrets here: key points", "no secrets here: key points"},
	} {
		if got := Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestForPeople(t *testing.T) {
	in := `Post "http://u:p@127.0.0.1:4567/v1?api-key=SECRET": dial tcp [::1]:4567 and localhost:99 and 10.0.0.3`
	got := ForPeople(in)
	for _, bad := range []string{"SECRET", "127.0.0.1", "4567", "::1", "localhost", "10.0.0.3", "u:p"} {
		if strings.Contains(got, bad) {
			t.Errorf("ForPeople kept %q: %s", bad, got)
		}
	}
	if !strings.Contains(got, "[address]") {
		t.Errorf("ForPeople = %q, want [address] in place of the addresses", got)
	}
}
