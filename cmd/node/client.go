package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/spf13/cobra"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// The client commands talk to a running node through its NATS micro API,
// so they work the same against an embedded node and a cluster.

func newSendCmd(g *globals) *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   "send <type> <id> <command> [json]",
		Short: "Send a command to an aggregate and print the result",
		Example: `  esjet send trip t1 request_trip '{"traveler":"ada","destination":"Lisbon","budget":100000,"flight_price":40000,"hotel_price":30000}'
  esjet send trip t1 add_note '{"text":"window seat"}' --key note-1`,
		Args: cobra.RangeArgs(3, 4),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := sendBody(args)
			if err != nil {
				return err
			}
			if err := checkTokens(args[0], args[1], args[2]); err != nil {
				return err
			}
			hdr := nats.Header{}
			if key != "" {
				hdr.Set(api.HeaderIdempotencyKey, key)
			}
			return g.request(cmd, args[0], fmt.Sprintf("%s.%s.%s", args[0], args[1], args[2]), body, hdr, printJSON)
		},
	}
	cmd.Flags().StringVarP(&key, "key", "k", "", "idempotency key: a retry with the same key returns the first result")
	return cmd
}

// sendBody is the command's payload: the fourth argument, which must be
// JSON, or {}.
func sendBody(args []string) ([]byte, error) {
	if len(args) < 4 {
		return []byte("{}"), nil
	}
	body := []byte(args[3])
	if !json.Valid(body) {
		return nil, fmt.Errorf("the payload is not valid JSON: %s (quote it for the shell: '{\"text\":\"hi\"}')", args[3])
	}
	return body, nil
}

// checkTokens validates the aggregate type, id and (when given) command kind
// before anything is sent, so a dot or a space is reported as what it is
// instead of as a subject the node does not serve.
func checkTokens(typ, id string, kind ...string) error {
	errs := []error{wire.ValidateToken("aggregate type", typ), wire.ValidateToken("aggregate id", id)}
	for _, k := range kind {
		switch {
		case k == "state" || k == "events":
			errs = append(errs, fmt.Errorf("%q is not a command but a read of the aggregate: use esjet %s %s %s", k, k, typ, id))
			continue
		case slices.Contains(api.RouteWords, k):
			errs = append(errs, fmt.Errorf("%q is one of the API's route words (%s), never a command kind", k, strings.Join(api.RouteWords, ", ")))
			continue
		}
		errs = append(errs, wire.ValidateToken("command kind", k))
	}
	return errors.Join(errs...)
}

func newStateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "state <type> <id>",
		Short: "Print an aggregate's current state and version",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTokens(args[0], args[1]); err != nil {
				return err
			}
			c, err := g.dial(cmd)
			if err != nil {
				return err
			}
			defer c.close()
			data, err := c.call(cmd.Context(), args[0], fmt.Sprintf("%s.%s.state", args[0], args[1]), nil, nil)
			if isCode(err, api.CodeUnknownType) && c.rawType(cmd.Context(), args[0], args[1]) {
				return fmt.Errorf("%s is a raw type (its events are appended through /v1/raw/%s/<id>/events), not one of the node's registered types: the node folds no state for it, only keeps its events; read them with `esjet events %s %s` or GET /v1/raw/%s/%s/events",
					args[0], args[0], args[0], args[1], args[0], args[1])
			}
			if err != nil {
				return err
			}
			return printJSON(g.stdout, data)
		},
	}
}

func newEventsCmd(g *globals) *cobra.Command {
	var asJSON, withSchema bool
	var pageSize int
	cmd := &cobra.Command{
		Use:   "events <type> <id>",
		Short: "Print an aggregate's history: versions, event types, times, ids, and the commands issued",
		Long: `Print an aggregate's whole history. The node answers it in pages (at most
` + strconv.Itoa(api.MaxPageLimit) + ` events each, following next_after); this command reads every page.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTokens(args[0], args[1]); err != nil {
				return err
			}
			// Checked here, so the message names the flag, not the header
			// it becomes.
			if pageSize < 1 || pageSize > api.MaxPageLimit {
				return fmt.Errorf("--page-size must be 1 to %d events, got %d", api.MaxPageLimit, pageSize)
			}
			c, err := g.dial(cmd)
			if err != nil {
				return err
			}
			defer c.close()
			h, err := c.history(cmd.Context(), args[0], args[1], pageSize)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				return enc.Encode(h)
			}
			printHistory(g.stdout, h, withSchema)
			return nil
		},
	}
	cmd.Flags().BoolVar(&withSchema, "schema", false, "add each event's schema version (stored→current when the node's upcasters changed it)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	cmd.Flags().IntVar(&pageSize, "page-size", api.MaxPageLimit, "events per request (1-"+strconv.Itoa(api.MaxPageLimit)+")")
	return cmd
}

// client is a connection to the node the config describes, for API requests.
type client struct {
	nc *nats.Conn
	ns string
}

func (g *globals) dial(cmd *cobra.Command) (*client, error) {
	cfg, err := g.load(cmd.Flags())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
	defer cancel()
	nc, err := g.connect(ctx, cfg, "esjet "+cmd.Name())
	if err != nil {
		return nil, err
	}
	return &client{nc: nc, ns: cfg.Namespace}, nil
}

func (c *client) close() { c.nc.Close() }

// call sends one API request about aggregate type typ (suffix follows
// esjet.<ns>.) and returns the reply's body, or the API error as a message
// for exit code 1.
func (c *client) call(ctx context.Context, typ, suffix string, body []byte, hdr nats.Header) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	msg := nats.NewMsg(wire.APIPrefix(c.ns) + "." + suffix)
	msg.Data = body
	for k, vs := range hdr {
		for _, v := range vs {
			msg.Header.Add(k, v)
		}
	}
	reply, err := c.nc.RequestMsgWithContext(ctx, msg)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, noResponders(ctx, c.nc, c.ns, typ)
	}
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", msg.Subject, err)
	}
	if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
		return nil, apiError(code, reply)
	}
	return reply.Data, nil
}

// history reads every page of an aggregate's history into one.
func (c *client) history(ctx context.Context, typ, id string, pageSize int) (api.History, error) {
	var all api.History
	var after uint64
	suffix := fmt.Sprintf("%s.%s.events", typ, id)
	for {
		hdr := nats.Header{}
		hdr.Set(api.HeaderAfterVersion, strconv.FormatUint(after, 10))
		hdr.Set(api.HeaderLimit, strconv.Itoa(pageSize))
		data, err := c.call(ctx, typ, suffix, nil, hdr)
		if isCode(err, api.CodeUnknownType) && after == 0 {
			// Not a registered type: a raw one's events are read as the
			// raw API reads them; a type with none there is unknown.
			raw := fmt.Sprintf("raw.events.%s.%s", typ, id)
			if rawData, rawErr := c.call(ctx, typ, raw, nil, hdr); rawErr == nil {
				suffix, data, err = raw, rawData, nil
			}
		}
		if err != nil {
			return all, err
		}
		var page api.History
		if err := json.Unmarshal(data, &page); err != nil {
			return all, fmt.Errorf("history page after version %d: %w", after, err)
		}
		if after == 0 {
			all = page
		} else {
			all.Events = append(all.Events, page.Events...)
			all.Commands = append(all.Commands, page.Commands...)
			all.Skipped = append(all.Skipped, page.Skipped...)
		}
		if page.NextAfter == 0 || page.NextAfter <= after {
			all.NextAfter = 0
			return all, nil
		}
		after = page.NextAfter
	}
}

// request sends one API request about aggregate type typ and prints the
// reply with show.
func (g *globals) request(cmd *cobra.Command, typ, suffix string, body []byte, hdr nats.Header, show func(io.Writer, []byte) error) error {
	c, err := g.dial(cmd)
	if err != nil {
		return err
	}
	defer c.close()
	data, err := c.call(cmd.Context(), typ, suffix, body, hdr)
	if err != nil {
		return err
	}
	return show(g.stdout, data)
}

// noResponders explains a request nobody answered: no node serves the
// namespace, or (a node older than the catch-all endpoint) the type is not
// one of its aggregate types.
func noResponders(ctx context.Context, nc *nats.Conn, ns, typ string) error {
	types, err := nc.RequestWithContext(ctx, wire.APIPrefix(ns)+".types", nil)
	if err != nil {
		// A mistyped namespace says so, where the user may list streams
		// (node, admin and operator users; a client's list is denied, and
		// goes unanswered: hence the short wait).
		if js, jerr := jetstream.New(nc); jerr == nil {
			lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := ops.RequireNamespace(lctx, js, ns)
			cancel()
			if errors.Is(err, ops.ErrNoNamespace) {
				return err
			}
		}
		return fmt.Errorf("no esjet node serves namespace %q at %s (is `esjet run` running with that namespace?)", ns, nc.ConnectedUrlRedacted())
	}
	var infos []api.TypeInfo
	_ = json.Unmarshal(types.Data, &infos)
	var names []string
	for _, t := range infos {
		names = append(names, t.Type)
	}
	return fmt.Errorf("404 unknown_type: the node serving namespace %q has no aggregate type %q (it has: %s)", ns, typ, strings.Join(names, ", "))
}

func apiError(code string, reply *nats.Msg) error {
	var body struct{ Error api.Error }
	e := &replyError{text: reply.Header.Get(micro.ErrorHeader)}
	if json.Unmarshal(reply.Data, &body) == nil && body.Error.Message != "" {
		e.code, e.text = body.Error.Code, body.Error.Code+": "+body.Error.Message
	}
	e.status, _ = strconv.Atoi(code)
	return e
}

// replyError is an API error reply as the CLI prints it ("404
// unknown_type: …"), keeping its code for the commands that act on it.
type replyError struct {
	status     int
	code, text string
}

func (e *replyError) Error() string { return fmt.Sprintf("%d %s", e.status, e.text) }

// isCode reports whether err is an API error reply with code.
func isCode(err error, code string) bool {
	var re *replyError
	return errors.As(err, &re) && re.code == code
}

// rawType reports whether typ, unknown to the node's registered types, has
// events under id appended through the raw API: a raw type.
func (c *client) rawType(ctx context.Context, typ, id string) bool {
	hdr := nats.Header{}
	hdr.Set(api.HeaderLimit, "1")
	_, err := c.call(ctx, typ, fmt.Sprintf("raw.events.%s.%s", typ, id), nil, hdr)
	return err == nil
}

func printJSON(w io.Writer, data []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, data, "", "  "); err != nil {
		_, err = w.Write(data)
		return err
	}
	buf.WriteByte('\n')
	_, err := buf.WriteTo(w)
	return err
}

// printSkipped is the row of a message on the subject that esjet did not
// write: the aggregate steps over it.
func printSkipped(w io.Writer, f streams.Foreign, withSchema bool) {
	desc := fmt.Sprintf("(skipped: not an esjet decision, %d bytes)", f.Size)
	if withSchema {
		desc += "\t-"
	}
	fmt.Fprintf(w, "-\t%s\t%s\t%d\t-\t-\t-\n", desc, f.Stored.Format(time.RFC3339Nano), f.Seq)
}

func printHistory(w io.Writer, h api.History, withSchema bool) {
	fmt.Fprintf(w, "%s/%s at version %d (stream seq %d)\n\n", h.AggregateType, h.AggregateID, h.Version, h.Seq)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if withSchema {
		fmt.Fprintln(tw, "VERSION\tEVENT\tSCHEMA\tTIME\tSEQ\tPOSITION\tEVENT ID\tDECISION ID")
	} else {
		fmt.Fprintln(tw, "VERSION\tEVENT\tTIME\tSEQ\tPOSITION\tEVENT ID\tDECISION ID")
	}
	skipped := h.Skipped
	for _, e := range h.Events {
		for len(skipped) > 0 && skipped[0].Seq < e.Seq {
			printSkipped(tw, skipped[0], withSchema)
			skipped = skipped[1:]
		}
		typ := e.Type
		if withSchema {
			typ += "\t" + schemaText(e)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\n", e.Version, typ, e.Time.Format(time.RFC3339Nano), e.Seq, e.Position, e.ID, e.DecisionID)
	}
	for _, f := range skipped {
		printSkipped(tw, f, withSchema)
	}
	_ = tw.Flush()
	if len(h.Commands) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COMMAND ID\tKIND\tSEQ\tREPORT\tDELIVER AFTER")
	for _, c := range h.Commands {
		after := "-"
		if c.DeliverAfter != nil {
			after = c.DeliverAfter.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%s\n", c.ID, c.Kind, c.Seq, c.Report, after)
	}
	_ = tw.Flush()
}

// schemaText is an event's schema version as `esjet events --schema`
// shows it: "2", or "1→2" when the node's upcasters brought a stored 1 to 2.
func schemaText(e api.HistoryEvent) string {
	v := strconv.Itoa(max(e.Schema, 1))
	if e.StoredSchema > 0 && e.StoredSchema != e.Schema {
		return strconv.Itoa(e.StoredSchema) + "→" + v
	}
	return v
}

// connectJetStream connects as g.connect does and opens JetStream on the
// connection; the caller closes nc.
func (g *globals) connectJetStream(ctx context.Context, cfg config.Config, name string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := g.connect(ctx, cfg, name, opts...)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}
