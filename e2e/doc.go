// Package e2e holds black-box tests: they build the esjet binary once and
// run it as a child process — start, signals, restarts on the same data
// directory, bad input — asserting only on what a user or operator sees
// (exit codes, output, the NATS objects it creates).
package e2e
