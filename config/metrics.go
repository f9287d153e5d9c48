package config

// Metrics auth values.
const (
	MetricsAuthNone  = "none"  // /metrics is open (scrapers inside a private network)
	MetricsAuthToken = "token" // /metrics needs "Authorization: Bearer <admin.token>"
)

// Metrics turns on the Prometheus endpoint GET /metrics on the HTTP listener
// (DESIGN.md §10, "Metrics"). Changing it needs a restart.
type Metrics struct {
	// Enabled serves /metrics; default false (the path answers 404).
	Enabled bool `yaml:"enabled"`
	// Auth is MetricsAuthNone ("" means it too; default: scrapers often run unauthenticated
	// inside a network, and the metrics carry no message content or user ids)
	// or MetricsAuthToken, which requires admin.token to be set.
	Auth string `yaml:"auth"`
}

// validateMetrics checks metrics.auth, naming the field path.
func (c *Config) validateMetrics(p *problems) {
	if c.Metrics.Auth == "" {
		return // unset is "none"
	}
	checkEnum(p, "metrics.auth", c.Metrics.Auth, MetricsAuthNone, MetricsAuthToken)
	if c.Metrics.Enabled && c.Metrics.Auth == MetricsAuthToken && c.Admin.Token == "" {
		p.add("metrics.auth", `is "token" but admin.token is empty: set admin.token or use "none"`)
	}
}

// TokenRequired reports whether /metrics needs the admin bearer token.
func (m Metrics) TokenRequired() bool { return m.Auth == MetricsAuthToken }
