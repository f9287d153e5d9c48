package config

// validateRetention checks the retention section: no negative durations, and
// dedup keys kept at least MinDedupKeys (DESIGN.md §3: a redelivered message
// must still be recognised).
func (c *Config) validateRetention(p *problems) {
	r := c.Retention
	for _, f := range []struct {
		name string
		v    interface{ String() string }
		neg  bool
	}{
		{"run_events", r.RunEvents, r.RunEvents < 0},
		{"activity", r.Activity, r.Activity < 0},
		{"outbox", r.Outbox, r.Outbox < 0},
		{"dedup_keys", r.DedupKeys, r.DedupKeys < 0},
		{"idle_thread_messages", r.IdleThreadMessages, r.IdleThreadMessages < 0},
		{"interval", r.Interval, r.Interval < 0},
	} {
		if f.neg {
			p.add("retention."+f.name, "must not be negative, got %s", f.v)
		}
	}
	if r.DedupKeys > 0 && r.DedupKeys < MinDedupKeys {
		p.add("retention.dedup_keys", "must be at least %s (Telegram redelivers an update for up to 24 hours), got %s", MinDedupKeys, r.DedupKeys)
	}
}
