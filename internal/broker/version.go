package broker

import (
	"fmt"
	"strconv"
	"strings"
)

// A feature esjet relies on and the nats-server release (and JetStream API
// level) that brought it. An older server does not refuse these: it ignores
// the stream or consumer field it does not know, or answers an API call esjet
// makes later with an error nobody is waiting for — the node would print
// ready and then silently stop acting (issue 11 item 12). So the broker checks
// the server when it connects, and again after every reconnect.
type feature struct {
	what     string
	version  serverVersion
	apiLevel int // the JetStream API level the release reports (0: before 2.11)
}

// features is every server feature esjet uses, newest last.
var features = []feature{
	{what: "pinned priority groups (the relay: one active per namespace)", version: serverVersion{2, 11, 0}, apiLevel: 1},
	{what: "batched direct get (loading an aggregate, reconcile, the event scan)", version: serverVersion{2, 11, 0}, apiLevel: 1},
	{what: "message schedules (commands with deliver_after)", version: serverVersion{2, 12, 0}, apiLevel: 2},
}

// MinServerVersion is the oldest nats-server release esjet runs on, and
// MinAPILevel the JetStream API level it reports.
var (
	MinServerVersion = minRequired().version.String()
	MinAPILevel      = minRequired().apiLevel
)

func minRequired() feature {
	m := features[0]
	for _, f := range features[1:] {
		if m.version.less(f.version) {
			m = f
		}
	}
	return m
}

// serverVersion is a nats-server release: major.minor.patch. Pre-release
// suffixes are ignored (2.12.0-RC.1 counts as 2.12.0).
type serverVersion struct{ major, minor, patch int }

func parseServerVersion(s string) (serverVersion, error) {
	core, _, _ := strings.Cut(strings.TrimPrefix(s, "v"), "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return serverVersion{}, fmt.Errorf("nats-server version %q: want major.minor.patch", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return serverVersion{}, fmt.Errorf("nats-server version %q: want major.minor.patch", s)
		}
		n[i] = v
	}
	return serverVersion{n[0], n[1], n[2]}, nil
}

func (v serverVersion) less(w serverVersion) bool {
	if v.major != w.major {
		return v.major < w.major
	}
	if v.minor != w.minor {
		return v.minor < w.minor
	}
	return v.patch < w.patch
}

func (v serverVersion) String() string { return fmt.Sprintf("%d.%d.%d", v.major, v.minor, v.patch) }

// checkServerVersion refuses a server older than [MinServerVersion]; url
// names it in the error.
func checkServerVersion(url, version string) error {
	v, err := parseServerVersion(version)
	if err != nil {
		return &ServerTooOldError{URL: url, Version: version, Missing: missingFeatures(func(feature) bool { return true })}
	}
	missing := missingFeatures(func(f feature) bool { return v.less(f.version) })
	if len(missing) == 0 {
		return nil
	}
	return &ServerTooOldError{URL: url, Version: version, Missing: missing}
}

// checkAPILevel refuses a JetStream whose API level is below
// [MinAPILevel]: in a cluster the JetStream API may be answered by another,
// older, server than the one the client is connected to.
func checkAPILevel(url, version string, level int) error {
	missing := missingFeatures(func(f feature) bool { return level < f.apiLevel })
	if len(missing) == 0 {
		return nil
	}
	return &ServerTooOldError{URL: url, Version: version, APILevel: level, LevelTooLow: true, Missing: missing}
}

func missingFeatures(lacks func(feature) bool) []string {
	var out []string
	for _, f := range features {
		if lacks(f) {
			out = append(out, fmt.Sprintf("%s needs %s", f.what, f.version))
		}
	}
	return out
}
