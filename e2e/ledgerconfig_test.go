package e2e

// The node configs of the fault scenarios: the trip's kinds routed to the
// effect ledger (loadgen_test.go) with short timings.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ledgerNodeConfig writes a node config routing the trip's six kinds to the
// ledger's subjects with short timings; extra is top-level YAML appended
// as is (it must not repeat workers: or outbox:). Run the node with
// ESJET_DEMO_SERVICES=false.
func ledgerNodeConfig(t *testing.T, extra string) string {
	t.Helper()
	return ledgerNodeConfigKinds(t, slices.Sorted(mapKeys(ledgerSubjects)), extra)
}

// ledgerNodeConfigKinds is ledgerNodeConfig with workers for kinds only:
// the other kinds wait in OUTBOX for another node's workers.
func ledgerNodeConfigKinds(t *testing.T, kinds []string, extra string) string {
	t.Helper()
	return writeLedgerConfig(t, kinds, func(string) ledgerKind { return ledgerKind{timeout: "5s"} }, extra)
}

// ledgerKind is what a scenario sets of one kind's worker beside the
// ledger's defaults.
type ledgerKind struct {
	subject string // the ledger's subject for the kind if empty
	timeout string
	more    string // more YAML lines of the kind, each indented by 4
}

// writeLedgerConfig writes a node config with a worker for each of kinds
// on the ledger's subjects, with short timings and what of returns for it,
// and the relay's short timings; extra is top-level YAML appended as is.
func writeLedgerConfig(t *testing.T, kinds []string, of func(kind string) ledgerKind, extra string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("workers:\n")
	for _, k := range kinds {
		lk := of(k)
		if lk.subject == "" {
			lk.subject = ledgerSubjects[k]
		}
		fmt.Fprintf(&b, "  %s:\n    target: nats\n    subject: %s\n    ack_wait: %s\n    timeout: %s\n    max_attempts: 50\n    backoff_initial: 50ms\n    backoff_max: 500ms\n%s",
			k, lk.subject, faultAckWait, lk.timeout, lk.more)
	}
	fmt.Fprintf(&b, "outbox:\n  ack_wait: %s\n  failover_after: 2s\n", faultRelayAckWait)
	b.WriteString(extra)
	path := filepath.Join(t.TempDir(), "esjet.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
