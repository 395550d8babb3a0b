package bench

import "github.com/esjet/esjet/internal/aggregate"

// The bench aggregate "acct": deposit records deposited (the append, micro,
// load and replay phases: one event, no command, so nothing runs behind
// the measured writes); pay records paid and issues charge with Report,
// and charge_done records charged (e2e, like BenchmarkEndToEnd).

type accountState struct {
	Balance int `json:"balance"`
	Charged int `json:"charged"`
}

type amount struct {
	Amount int    `json:"amount"`
	Note   string `json:"note,omitempty"` // the scale phase's padding
}

// Account is the bench aggregate type.
func Account() *aggregate.Definition {
	def := aggregate.Define("acct", 1, func(s accountState, e aggregate.Event) accountState {
		switch e.Type {
		case "deposited":
			var a amount
			_ = e.Decode(&a)
			s.Balance += a.Amount
		case "charged":
			s.Charged++
		}
		return s
	})
	aggregate.On(def, "deposit", func(s accountState, c amount) (aggregate.Decision, error) {
		return aggregate.Emit("deposited", c), nil
	})
	aggregate.On(def, "pay", func(s accountState, c amount) (aggregate.Decision, error) {
		return aggregate.Emit("paid", c).Issue("charge", c), nil
	})
	aggregate.On(def, "charge_done", func(s accountState, o aggregate.Outcome) (aggregate.Decision, error) {
		return aggregate.Emit("charged", o), nil
	})
	aggregate.On(def, "charge_failed", func(s accountState, o aggregate.Outcome) (aggregate.Decision, error) {
		return aggregate.Emit("charge_failed", o), nil
	})
	return def.Definition()
}
