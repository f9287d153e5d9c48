package config

import (
	"strings"
	"testing"
)

// Retention keys parse, and a dedup retention shorter than the platforms'
// redelivery windows is refused at its field path.
func TestRetentionValidation(t *testing.T) {
	cfg := parseOK(t, minimal+"retention: {run_events: 48h, activity: 24h, idle_thread_messages: 2160h}\n", nil)
	if cfg.Retention.RunEvents.Hours() != 48 || cfg.Retention.IdleThreadMessages.Hours() != 2160 {
		t.Errorf("retention = %+v", cfg.Retention)
	}
	es := parseErrs(t, minimal+"retention: {dedup_keys: 1h, outbox: -1h}\n")
	for _, want := range []string{"retention.dedup_keys: must be at least 24h0m0s", "retention.outbox: must not be negative"} {
		if !strings.Contains(es.Error(), want) {
			t.Errorf("error %v lacks %q", es, want)
		}
	}
}
