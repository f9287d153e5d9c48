package slack

import "testing"

func TestUsageCommand(t *testing.T) {
	for _, tc := range []struct {
		text, handle string
		want         bool
	}{
		{"usage", "", true}, {"/usage", "", true}, {"@openbot USAGE", "openbot", true},
		{"@openbot @engineer usage", "engineer", true}, {"usage please", "", false}, {"what is my usage", "", false}, {"@engineer", "", false},
	} {
		h, ok := usageCommand(tc.text)
		if ok != tc.want || (ok && h != tc.handle) {
			t.Errorf("usageCommand(%q) = %q, %v; want %q, %v", tc.text, h, ok, tc.handle, tc.want)
		}
	}
}
