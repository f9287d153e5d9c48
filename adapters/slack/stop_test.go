package slack

import "testing"

func TestStopCommand(t *testing.T) {
	for _, tc := range []struct {
		text string
		want bool
	}{
		{"stop", true},
		{"/stop", true},
		{"STOP", true},
		{"@engineer stop", true},
		{"@openbot @engineer /stop", true},
		{"  stop  ", true},
		{"stop the build", false},
		{"please stop", false},
		{"@engineer", false},
		{"", false},
		{"/stopper", false},
	} {
		if got := stopCommand(tc.text); got != tc.want {
			t.Errorf("stopCommand(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}
