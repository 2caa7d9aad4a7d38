package metrics

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

func TestExpositionParses(t *testing.T) {
	m := New(func(context.Context) ([]session.Session, error) {
		return []session.Session{{Observed: session.Running}, {Observed: session.Running}, {Observed: session.Asleep}}, nil
	})
	m.Record(decisionlog.Entry{Path: "/v1/messages?beta=true", Decision: "forwarded", Status: 200, InputTokens: 25, OutputTokens: 12, DurationMS: 40, Stream: true})
	m.Record(decisionlog.Entry{Path: "/v1/files", Decision: "refused", Status: 404})
	m.Record(decisionlog.Entry{Kind: "egress", Decision: "denied"})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("the Prometheus text parser refused the exposition: %v", err)
	}
	value := func(name string, labels map[string]string) float64 {
		f := fams[name]
		if f == nil {
			t.Fatalf("no %s", name)
		}
	next:
		for _, mt := range f.Metric {
			for _, lp := range mt.Label {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			switch {
			case mt.Counter != nil:
				return mt.Counter.GetValue()
			case mt.Gauge != nil:
				return mt.Gauge.GetValue()
			case mt.Histogram != nil:
				return float64(mt.Histogram.GetSampleCount())
			}
		}
		t.Fatalf("no %s with %v", name, labels)
		return 0
	}
	if v := value("paddock_sessions", map[string]string{"state": "running"}); v != 2 {
		t.Errorf("running sessions %v", v)
	}
	if v := value("paddock_proxy_requests_total", map[string]string{"route": "/v1/messages", "status": "200"}); v != 1 {
		t.Errorf("requests %v", v)
	}
	if v := value("paddock_proxy_requests_total", map[string]string{"route": "other", "decision": "refused"}); v != 1 {
		t.Errorf("refused %v", v)
	}
	if v := value("paddock_tokens_total", map[string]string{"kind": "output"}); v != 12 {
		t.Errorf("tokens %v", v)
	}
	if v := value("paddock_egress_decisions_total", map[string]string{"decision": "denied"}); v != 1 {
		t.Errorf("egress %v", v)
	}
	if v := value("paddock_proxy_request_duration_seconds", map[string]string{"route": "/v1/messages", "stream": "true"}); v != 1 {
		t.Errorf("durations %v", v)
	}
}
