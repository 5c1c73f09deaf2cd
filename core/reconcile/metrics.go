package reconcile

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gcompose/gcompose/core/state"
)

// Metrics are what the reconciler exports on /metrics (Prometheus text
// format). One registry per reconciler: every series carries the app.
type Metrics struct {
	reg *prometheus.Registry

	leader       prometheus.Gauge
	cycles       *prometheus.CounterVec
	resources    *prometheus.GaugeVec
	repairs      *prometheus.CounterVec
	failures     *prometheus.CounterVec
	timeToRepair prometheus.Histogram
	spent        *prometheus.GaugeVec
	spentTotal   *prometheus.GaugeVec
	perHour      *prometheus.GaugeVec
	mismatch     prometheus.Gauge
	budget       *prometheus.GaugeVec
	lastCycle    prometheus.Gauge
}

// Resource statuses of gcompose_reconcile_resources: a resource's state
// status, lowercased, or drifted when the last refresh found it drifted.
var resourceStatuses = []string{"active", "pending", "terminated", "drifted"}

// NewMetrics makes the reconciler's metrics for app.
func NewMetrics(app string) *Metrics {
	reg := prometheus.NewRegistry()
	l := prometheus.Labels{"app": app}
	m := &Metrics{
		reg: reg,
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gcompose_reconcile_leader", ConstLabels: l,
			Help: "1 while this reconciler leads (repairs), 0 while it stands by."}),
		cycles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gcompose_reconcile_cycles_total", ConstLabels: l,
			Help: "Cycles run as leader, by outcome: healthy, repaired, failed, refused, busy (the state was locked by someone else), mismatch (the descriptor is not the one deployed), stopped (cut short: the reconciler stops or no longer leads)."}, []string{"outcome"}),
		resources: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gcompose_reconcile_resources", ConstLabels: l,
			Help: "Deployed resources at the last refresh, by status: active, pending, terminated (the state's), drifted (found not as recorded)."}, []string{"status"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gcompose_reconcile_repairs_total", ConstLabels: l,
			Help: "Repairs, by result: repaired, failed, refused (over the budget, or more than a repair)."}, []string{"result"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gcompose_reconcile_failures_total", ConstLabels: l,
			Help: "Failures, by stage: load (the descriptor), refresh, repair, spend (reading payments)."}, []string{"stage"}),
		timeToRepair: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gcompose_reconcile_time_to_repair_seconds", ConstLabels: l,
			Help:    "From the cycle that first saw a drift to the end of the repair that fixed it.",
			Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800}}),
		spent: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gcompose_reconcile_spent", ConstLabels: l,
			Help: "What each resource has cost so far, as its adapter reports it (removed resources from the state's ledger), in the currency labelled."}, []string{"resource", "currency"}),
		spentTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gcompose_reconcile_spent_total", ConstLabels: l,
			Help: "What the whole application has cost so far, as its adapters report it, in the currency labelled."}, []string{"currency"}),
		perHour: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gcompose_reconcile_cost_per_hour", ConstLabels: l,
			Help: "The agreed cost per hour of what runs, at the last refresh, in the currency labelled."}, []string{"currency"}),
		mismatch: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gcompose_reconcile_intent_mismatch", ConstLabels: l,
			Help: "1 while the descriptor differs from what was deployed: nothing is repaired until a person deploys it."}),
		budget: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gcompose_reconcile_budget", ConstLabels: l,
			Help: "The budget in force, by limit: per_hour, total (absent: none), in the adapters' currency."}, []string{"limit"}),
		lastCycle: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gcompose_reconcile_last_cycle_timestamp_seconds", ConstLabels: l,
			Help: "When the last cycle ended (Unix time)."}),
	}
	reg.MustRegister(m.leader, m.cycles, m.resources, m.repairs, m.failures, m.timeToRepair, m.spent, m.spentTotal, m.perHour, m.mismatch, m.budget, m.lastCycle)
	// Every series exists from the start, at 0: a rate() over a counter
	// that appears only at its first increment misses it.
	for _, o := range []Outcome{Healthy, Repaired, Failed, Refused, Busy, Mismatch, Stopped} {
		m.cycles.WithLabelValues(string(o))
	}
	for _, r := range []string{"repaired", "failed", "refused"} {
		m.repairs.WithLabelValues(r)
	}
	for _, s := range []string{"load", "refresh", "repair", "spend"} {
		m.failures.WithLabelValues(s)
	}
	for _, s := range resourceStatuses {
		m.resources.WithLabelValues(s)
	}
	return m
}

// Handler serves the metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is where the metrics are registered (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

func (m *Metrics) setResources(doc *state.Document, drifted []Drifted) {
	counts := map[string]int{}
	isDrifted := map[string]bool{}
	for _, d := range drifted {
		isDrifted[d.Resource] = true
	}
	if doc != nil {
		for name, r := range doc.Resources {
			if isDrifted[name] {
				counts["drifted"]++
				continue
			}
			counts[strings.ToLower(string(r.Status))]++
		}
	}
	for _, s := range resourceStatuses {
		m.resources.WithLabelValues(s).Set(float64(counts[s]))
	}
}

func (m *Metrics) setSpend(sp *Spend) {
	m.spent.Reset()
	m.spentTotal.Reset()
	if sp.Currency == "" {
		return // no adapter reports spend
	}
	for name, v := range sp.ByResource {
		m.spent.WithLabelValues(name, sp.Currency).Set(v)
	}
	m.spentTotal.WithLabelValues(sp.Currency).Set(sp.Total)
}

func (m *Metrics) setPerHour(by map[string]float64) {
	m.perHour.Reset()
	for c, v := range by {
		m.perHour.WithLabelValues(c).Set(v)
	}
}

func (m *Metrics) setBudget(b Budget) {
	m.budget.Reset()
	if b.PerHour > 0 {
		m.budget.WithLabelValues("per_hour").Set(b.PerHour)
	}
	if b.Total > 0 {
		m.budget.WithLabelValues("total").Set(b.Total)
	}
}
