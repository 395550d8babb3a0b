package node

import "github.com/prometheus/client_golang/prometheus"

// siteMetrics serves the hub's view of its sites on /metrics: per site
// the lag (decisions recorded there and not yet at the hub) and a 1 on its
// current state (ok, catching_up, unreachable, stalled, recreated), so an
// alert can fire on esjet_edge_site_state{state="stalled"} == 1.
type siteMetrics struct {
	m           *siteMonitor
	lag, state  *prometheus.Desc
	hubSeq, seq *prometheus.Desc
}

func newSiteMetrics(m *siteMonitor) *siteMetrics {
	return &siteMetrics{
		m:      m,
		lag:    prometheus.NewDesc("esjet_edge_site_lag", "Decisions recorded at the edge site and not yet at the hub.", []string{"site"}, nil),
		state:  prometheus.NewDesc("esjet_edge_site_state", "1 for the site's current state as the hub sees it (ok, catching_up, unreachable, stalled, recreated).", []string{"site", "state"}, nil),
		hubSeq: prometheus.NewDesc("esjet_edge_site_hub_seq", "The last site sequence the hub holds.", []string{"site"}, nil),
		seq:    prometheus.NewDesc("esjet_edge_site_last_seq", "The last sequence of the site's event log (when the hub last reached it).", []string{"site"}, nil),
	}
}

func (c *siteMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lag
	ch <- c.state
	ch <- c.hubSeq
	ch <- c.seq
}

func (c *siteMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.m.Sites() {
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(s.Lag), s.Site)
		ch <- prometheus.MustNewConstMetric(c.hubSeq, prometheus.GaugeValue, float64(s.HubSeq), s.Site)
		ch <- prometheus.MustNewConstMetric(c.seq, prometheus.GaugeValue, float64(s.SiteLastSeq), s.Site)
		for _, st := range []string{SiteOK, SiteCatchingUp, SiteUnreachable, SiteStalled, SiteRecreated} {
			v := 0.0
			if s.State == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, s.Site, st)
		}
	}
}
