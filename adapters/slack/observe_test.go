package slack

import (
	"net/http/httptest"
	"strings"
	"testing"

	"openbot/adapters/internal/adaptertest"
	"openbot/core"
)

// observedEngine is the fake engine with an Observer, as *core.Engine has.
type observedEngine struct {
	*fakeEngine
	obs *adaptertest.Inbound
}

func (e observedEngine) Observe() core.Observer { return e.obs }

// TestBadRequestsReportInbound: every malformed or refused request is counted
// once for metrics, "refused" for allow-list and authorization refusals and
// "dropped" for the rest (DESIGN.md §10, Metrics).
func TestBadRequestsReportInbound(t *testing.T) {
	for _, c := range badRequests() {
		t.Run(c.name, func(t *testing.T) {
			obs := &adaptertest.Inbound{}
			e := newEnv(t, func(o *Options) {
				o.Engine = observedEngine{o.Engine.(*fakeEngine), obs}
				if c.opts != nil {
					c.opts(o)
				}
			})
			if c.engine != nil {
				c.engine(e.engine)
			}
			e.mux.ServeHTTP(httptest.NewRecorder(), c.req(t, e))
			e.a.bg.wait(5e9)
			want := "slack/" + core.InboundDropped
			for _, w := range []string{"allow list", "signature", "timestamp", "may not answer"} {
				if strings.Contains(c.reason, w) {
					want = "slack/" + core.InboundRefused
				}
			}
			if got := obs.All(); len(got) != 1 || got[0] != want {
				t.Errorf("reported %v, want [%s]", got, want)
			}
		})
	}
}
