package main

import (
	"log/slog"
	"net/http"

	"openbot/admin/web"
	"openbot/agents/mcp"
	"openbot/config"
	"openbot/core"
	"openbot/metrics"
)

// newMetrics builds the Prometheus metrics when metrics.enabled is set, else
// returns nil (DESIGN.md §10, "Metrics").
func newMetrics(cfg *config.Config, log *slog.Logger) *metrics.Metrics {
	if !cfg.Metrics.Enabled {
		return nil
	}
	return metrics.New(metrics.Options{Logger: log})
}

// observer is m as the engine's Observer; nil (metrics off) stays a nil
// interface, which the engine treats as "observe nothing".
func observer(m *metrics.Metrics) core.Observer {
	if m == nil {
		return nil
	}
	return m
}

// mountMetrics serves GET /metrics on mux when m is set: open with
// metrics.auth "none", behind the admin bearer token (dash.Bearer) with "token".
func mountMetrics(mux *http.ServeMux, cfg *config.Config, m *metrics.Metrics, eng *core.Engine, dash *web.Dashboard, log *slog.Logger) {
	if m == nil {
		return
	}
	m.Watch(eng)
	var h http.Handler = m.Handler()
	if cfg.Metrics.TokenRequired() {
		h = dash.Bearer(h)
	}
	mux.Handle("GET /metrics", h)
	log.Info("prometheus metrics served", "path", "/metrics", "auth", cfg.Metrics.TokenRequired())
}

// observeState chains f with the MCP state metric; s.metrics is read at call
// time, as it is set after the managers are built and before Run starts them.
func (s *mcpSet) observeState(f func(mcp.ServerStatus)) func(mcp.ServerStatus) {
	return func(st mcp.ServerStatus) {
		if f != nil {
			f(st)
		}
		if s.metrics != nil {
			s.metrics.MCPState(st.Name, st.State)
		}
	}
}
