// Package spec is esjet's wire specification as files: the JSON Schemas of
// every request and reply of the API (NATS and HTTP), of a worker's request
// to a target and the reply it accepts, and of a receiver's record; the
// examples; and the language-neutral conformance cases that the Go,
// TypeScript and Python test suites each run against a real node.
//
// The prose is README.md beside this file; the machine-readable index
// (version, operations, headers, error codes) is spec.json. The package's
// tests hold the Go code to the files: every reply the node sends, every
// target request a worker sends and every record a receiver writes is
// validated against its schema, and every example is decoded into the Go
// type that reads it. Other languages read the files through [Files].
package spec

import "embed"

// Files holds spec.json, schemas/, examples/ and conformance/.
//
//go:embed spec.json schemas examples conformance
var Files embed.FS
