package receiver

import (
	"errors"
	"fmt"
	"time"
)

// Defaults for the zero values of [Config].
const (
	DefaultRetention = 7 * 24 * time.Hour
	DefaultLease     = time.Minute
)

// Config configures a [Receiver]. The zero value of every field but Bucket
// means its default.
type Config struct {
	// Bucket is the KV bucket that holds the receipts; required. Receivers
	// that share a bucket share their keys: give each service its own bucket
	// or its own key space.
	Bucket string

	// Retention is how long a key is remembered after its last write (the
	// bucket's MaxAge); zero means 7 days. Once a key is forgotten, a
	// delivery with that key runs the effect again, so Retention MUST
	// outlast the producer's longest retry horizon: for esjet that is the
	// longest a command can still be delivered — its OUTBOX age limit, and
	// the DLQ retention if dead letters may be re-driven (esjet dlq retry
	// keeps the command id) — plus clock slack. When in doubt, err long:
	// a receipt costs a few hundred bytes.
	Retention time.Duration

	// Lease is how long a claim stays valid without news from its owner;
	// zero means 1 minute. The owner renews its claim every Lease/3 while
	// the effect runs, so a long effect keeps its claim; a claim not
	// renewed for longer than Lease (its owner crashed or lost the
	// connection) is taken over by the next delivery, which runs the effect
	// again. Staleness is judged by elapsed time only: a waiting delivery
	// takes a claim over when it has seen the claim's revision unchanged
	// for Lease, so clock skew between receivers and the server does not
	// matter (a delivery arriving late may wait up to one more Lease).
	Lease time.Duration

	// Replicas is the bucket's replication factor; zero means 1. Use 3 on a
	// three-server cluster.
	Replicas int
}

func (c *Config) setDefaults() {
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
}

// Validate reports every problem with c at once; zero values are valid
// (they mean the defaults) except for Bucket.
func (c Config) Validate() error {
	var errs []error
	if c.Bucket == "" {
		errs = append(errs, errors.New("receiver: bucket is empty; name the KV bucket that keeps the receipts"))
	} else if !validBucket(c.Bucket) {
		errs = append(errs, fmt.Errorf("receiver: bucket %q: use only letters, digits, '-' and '_'", c.Bucket))
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("receiver: retention is %s; want a positive duration (zero means %s)", c.Retention, DefaultRetention))
	}
	if c.Lease < 0 {
		errs = append(errs, fmt.Errorf("receiver: lease is %s; want a positive duration (zero means %s)", c.Lease, DefaultLease))
	}
	if c.Retention > 0 && c.Lease > 0 && c.Lease >= c.Retention {
		errs = append(errs, fmt.Errorf("receiver: lease %s is not shorter than retention %s: shorten Lease or raise Retention (which must outlast the producer's longest retry)", c.Lease, c.Retention))
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("receiver: replicas is %d; want 1 to 5 (zero means 1)", c.Replicas))
	}
	return errors.Join(errs...)
}

func validBucket(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
		default:
			return false
		}
	}
	return true
}
