package node

import (
	"testing"
	"time"
)

// TestSiteMonitorWaitsFromWhenThereIsSomethingToWaitFor: a hub idle for an
// hour (last progress long ago) that sees a site's first new decisions has
// not waited an hour for them: it neither restarts the source at once (a
// working source consumer torn down, a restart counted in `esjet sites` on
// a fresh fleet) nor calls the site stalled; it restarts after restartIdle
// without progress, and calls it stalled after stall_after, both counted
// from when the lag appeared.
func TestSiteMonitorWaitsFromWhenThereIsSomethingToWaitFor(t *testing.T) {
	const stallAfter = time.Minute
	start := time.Now()
	tr := &siteTrack{SiteStatus: SiteStatus{Site: "s1", Connected: true, LastProgress: start.Add(-time.Hour)}}
	if tr.assess(start, "", true, stallAfter) || tr.State != SiteOK {
		t.Fatalf("no lag: state %s", tr.State)
	}
	tr.Lag = 2 // the site's first decisions, not at the hub yet
	if restart := tr.assess(start.Add(time.Second), "", true, stallAfter); restart || tr.State != SiteCatchingUp {
		t.Fatalf("lag just appeared: restart %v, state %s (%s)", restart, tr.State, tr.Note)
	}
	if restart := tr.assess(start.Add(time.Second+restartIdle), "", true, stallAfter); !restart || tr.State != SiteCatchingUp {
		t.Fatalf("no progress for restartIdle since the lag appeared: restart %v, state %s", restart, tr.State)
	}
	if restart := tr.assess(start.Add(time.Second+stallAfter), "", true, stallAfter); !restart || tr.State != SiteStalled {
		t.Fatalf("no progress for stall_after since the lag appeared: restart %v, state %s", restart, tr.State)
	}
	if tr.Restarts != 2 {
		t.Fatalf("restarts = %d, want 2", tr.Restarts)
	}
	tr.Lag, tr.LastProgress = 0, start.Add(2*stallAfter) // caught up
	tr.assess(start.Add(2*stallAfter), "", true, stallAfter)
	tr.Lag = 1 // later, one more: the wait starts again
	if restart := tr.assess(start.Add(2*stallAfter+time.Second), "", true, stallAfter); restart || tr.State != SiteCatchingUp {
		t.Fatalf("a new lag after catching up: restart %v, state %s", restart, tr.State)
	}
}

// TestSiteMonitorRestartsASourceNeverHeardFromOnceTheLinkIsUp: a hub
// started while its site was away has a source whose consumer create
// request went nowhere; once the site has answered for resumeAfterLink
// and the source has still said nothing (not even a heartbeat), the hub
// restarts it rather than waiting restartIdle. A source that has spoken is
// left alone.
func TestSiteMonitorRestartsASourceNeverHeardFromOnceTheLinkIsUp(t *testing.T) {
	const stallAfter = time.Minute
	start := time.Now()
	tr := &siteTrack{SiteStatus: SiteStatus{Site: "s1", Connected: true, Lag: 100, ActiveMS: -1, LastProgress: start}, seen: start}
	if restart := tr.assess(start.Add(resumeAfterLink/2), "", true, stallAfter); restart || tr.State != SiteCatchingUp {
		t.Fatalf("the link just came up: restart %v, state %s", restart, tr.State)
	}
	if restart := tr.assess(start.Add(resumeAfterLink), "", true, stallAfter); !restart {
		t.Fatalf("never heard from %s after the link came up: no restart", resumeAfterLink)
	}
	if restart := tr.assess(start.Add(resumeAfterLink+monitorEvery), "", true, stallAfter); restart {
		t.Fatal("restarted again within restartBetween")
	}

	heard := &siteTrack{SiteStatus: SiteStatus{Site: "s1", Connected: true, Lag: 100, ActiveMS: 500, LastProgress: start}, seen: start}
	if restart := heard.assess(start.Add(resumeAfterLink+monitorEvery), "", true, stallAfter); restart {
		t.Fatal("restarted a source that was heard from before restartIdle")
	}
}
