package esjet_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/esjet/esjet"
)

type Counter struct{ N int }

type Add struct {
	By int `json:"by"`
}

func counter() *esjet.Definition {
	def := esjet.Define("counter", 1, func(s Counter, e esjet.Event) Counter {
		var a Add
		_ = e.Decode(&a)
		s.N += a.By
		return s
	})
	esjet.On(def, "add", func(s Counter, c Add) (esjet.Decision, error) {
		if c.By <= 0 {
			return esjet.Decision{}, esjet.Reject("invalid", "by must be positive, got %d", c.By)
		}
		return esjet.Emit("added", c), nil
	})
	return def.Definition()
}

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "esjet-example-")
	defer os.RemoveAll(dir)

	cfg := esjet.DefaultConfig()
	cfg.NATS.Embedded.DataDir = filepath.Join(dir, "data")
	cfg.NATS.Embedded.Listen = "none" // in-process only
	cfg.HTTP.Listen = "none"
	node, err := esjet.Start(ctx, esjet.Options{Config: cfg, Aggregates: []*esjet.Definition{counter()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer node.Close(ctx)

	res, _ := node.Send(ctx, "counter", "c1", "add", Add{By: 2}, esjet.WithIdempotencyKey("req-1"))
	fmt.Println("version", res.Version, res.Events[0].Type)
	again, _ := node.Send(ctx, "counter", "c1", "add", Add{By: 2}, esjet.WithIdempotencyKey("req-1"))
	fmt.Println("retry replayed:", again.Replayed, "same decision:", again.DecisionID == res.DecisionID)
	_, err = node.Send(ctx, "counter", "c1", "add", Add{By: -1})
	fmt.Println("rejected:", errors.Is(err, esjet.ErrRejected), err)
	state, version, _ := node.State(ctx, "counter", "c1")
	fmt.Printf("state %+v at version %d\n", state, version)
	// Output:
	// version 1 added
	// retry replayed: true same decision: true
	// rejected: true invalid: by must be positive, got -1
	// state {N:2} at version 1
}
