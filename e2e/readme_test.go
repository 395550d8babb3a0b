package e2e

// The README's shell blocks, then those of every guide in docs/ (in name
// order), run against a fresh node, so the README and the guides cannot
// drift from what esjet does. The conventions, for whoever edits them:
//
//   - Every ```sh block runs, top to bottom, each command once, against one
//     node started as the Quickstart says (`esjet run` with the defaults, data
//     in ./data of a temp directory), except a block right after a line
//     `<!-- readme-test: skip (reason) -->`: the reason says why it cannot run
//     here (keep them few).
//   - A command fails the test if it exits non-zero. curl runs with
//     --fail-with-body, so an HTTP error (a 422 because an example reused an
//     id) fails it too — except a curl that prints the status itself
//     (-w '%{http_code}'): its shown output is the status it must answer.
//   - `# → text` after a command, on its line or on the lines below it
//     (continued by lines starting with "#  "), is the command's shown
//     output: its stdout must match. Whitespace is ignored (pretty or compact
//     JSON, aligned columns) and "…" stands for any text. A command that only
//     reads (curl without -X/-d, esjet state/events/outbox/streams/dlq ls/dlq
//     show/reconcile without --repair, nats req …state/…events, nats stream)
//     runs again for up to a minute until it matches: the saga runs
//     asynchronously ("a moment later"). Other `#` comments are prose.
//   - The block after `<!-- readme-test: node output -->` is what the node
//     prints when it starts; it must match a line of its stdout.
//   - The block after `<!-- readme-test: file NAME -->` (a config file a
//     guide shows as yaml, say) is written to NAME in the working directory
//     when the test reaches it, with a guide's ports mapped as below.
//
// The node listens on free ports instead of 4222 and 8080 (other tests run
// beside this one), and the commands reach it unchanged:
// ESJET_NATS_EMBEDDED_LISTEN and ESJET_HTTP_LISTEN point the node and esjet's
// subcommands there, NATS_URL the nats CLI (and the Python example), a
// .curlrc (connect-to) curl; outputs show the real ports mapped back to the
// defaults. The commands run in a temporary directory where `clients` is a
// link to the repository's, so a guide's `clients/…` paths (the Python
// client, run from the repository's root) reach it.
//
// A guide that starts processes of its own (a cluster, a hub and sites) names
// their ports as 127.0.0.1:P or localhost:P with P in 14000–17999, the
// guides' range: each such P gets a free port the first time a command names
// it, the one rewrite a command gets, and outputs show P again. A command
// that ends in & runs in the background: it redirects its output to a file
// (the next command waits for it, say with until grep -q ready n1.log; do
// sleep 0.2; done), and its processes are stopped (SIGTERM, then SIGKILL)
// when the test ends. Those processes set the listen addresses they need
// (ESJET_NATS_EMBEDDED_LISTEN, ESJET_HTTP_LISTEN or flags), since every
// command inherits the node's. `go run ./cmd/node ARGS` runs the binary this
// package built (a `go` on PATH that refuses anything else). The nats CLI is
// the one on PATH, else natscli is installed by `go install` from the module
// proxy.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
)

// natscliVersion is installed when no nats CLI is on PATH.
const natscliVersion = "v0.5.0"

// readmeBlock is one fenced ```sh block (or a marked output block).
type readmeBlock struct {
	file     string // README.md or docs/<name>.md
	line     int    // of the opening fence
	lang     string // "sh", or "" for a marked output block
	marker   string // the readme-test marker before it, "" if none
	commands []readmeCommand
	text     string // the block's raw body
}

// readmeCommand is one shell command of a block and the output shown for it.
type readmeCommand struct {
	file   string
	line   int
	text   string // as bash runs it (continuations joined)
	expect string // the "# →" text, "" when none is shown
}

var markerRe = regexp.MustCompile(`^<!--\s*readme-test:\s*(.+?)\s*-->$`)

// parseReadme returns the README's ```sh blocks and marked blocks in order.
func parseReadme(text string) ([]readmeBlock, error) {
	lines := strings.Split(text, "\n")
	var blocks []readmeBlock
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "```") {
			continue
		}
		b := readmeBlock{line: i + 1, lang: strings.TrimSpace(strings.TrimPrefix(l, "```"))}
		for j := i - 1; j >= 0 && j >= i-2; j-- { // the marker, maybe after one blank line
			if m := markerRe.FindStringSubmatch(strings.TrimSpace(lines[j])); m != nil {
				b.marker = m[1]
				break
			}
			if strings.TrimSpace(lines[j]) != "" {
				break
			}
		}
		end := i + 1
		for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("README.md:%d: a ``` block is not closed", i+1)
		}
		body := lines[i+1 : end]
		b.text = strings.Join(body, "\n")
		i = end
		if b.lang != "sh" && b.marker == "" {
			continue
		}
		if b.lang == "sh" {
			cmds, err := parseCommands(body, b.line+1)
			if err != nil {
				return nil, err
			}
			b.commands = cmds
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// parseCommands splits a block's lines into commands and their shown outputs.
func parseCommands(body []string, first int) ([]readmeCommand, error) {
	var cmds []readmeCommand
	var cur *readmeCommand
	inExpect := false
	for k := 0; k < len(body); k++ {
		l := body[k]
		t := strings.TrimSpace(l)
		switch {
		case t == "":
			inExpect = false
		case strings.HasPrefix(t, "# →"):
			if cur == nil {
				return nil, fmt.Errorf("README.md:%d: an output (# →) before any command", first+k)
			}
			cur.expect += strings.TrimSpace(strings.TrimPrefix(t, "# →"))
			inExpect = true
		case inExpect && strings.HasPrefix(l, "#  "):
			cur.expect += strings.TrimSpace(strings.TrimPrefix(t, "#"))
		case strings.HasPrefix(t, "#"):
			inExpect = false // prose
		default:
			inExpect = false
			c := readmeCommand{line: first + k}
			text := l
			// A command goes on after a trailing \ or inside an open '…'.
			for (strings.HasSuffix(text, `\`) || strings.Count(text, "'")%2 == 1) && k+1 < len(body) {
				k++
				text += "\n" + body[k]
			}
			if cmd, out, ok := strings.Cut(text, " # → "); ok {
				text, c.expect = cmd, strings.TrimSpace(out)
				inExpect = true
			}
			c.text = text
			cmds = append(cmds, c)
			cur = &cmds[len(cmds)-1]
		}
	}
	return cmds, nil
}

// readsOnly reports whether a command only reads, so it may run again until
// its shown output appears.
func readsOnly(cmd string) bool {
	c := " " + strings.Join(strings.Fields(cmd), " ") + " "
	switch {
	case strings.Contains(c, " curl "):
		return !strings.Contains(c, " -X") && !strings.Contains(c, " -d ") && !strings.Contains(c, " --data")
	case strings.Contains(c, " nats req "):
		return strings.Contains(c, ".state ") || strings.Contains(c, ".events ")
	case strings.Contains(c, " nats stream "):
		return true
	}
	for _, sub := range []string{" state ", " events ", " outbox ", " streams ", " dlq ls ", " dlq show ", " reconcile ", " sites "} {
		if strings.Contains(c, " ./cmd/node"+sub) && !strings.Contains(c, "--repair") {
			return true
		}
	}
	return false
}

// showsStatus reports whether cmd is a curl that prints the HTTP status.
func showsStatus(cmd string) bool {
	return strings.Contains(cmd, "curl ") && strings.Contains(cmd, "%{http_code}")
}

// exitCode is err's exit status, -1 when err is not an exit.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// outputPattern turns a shown output into a regexp over whitespace-free text.
func outputPattern(shown string) *regexp.Regexp {
	parts := strings.Split(squeeze(shown), "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?s)^` + strings.Join(parts, ".*?") + `$`)
}

func squeeze(s string) string {
	return strings.Join(strings.Fields(s), "")
}

// readmeEnv is where the README's commands run.
type readmeEnv struct {
	t        *testing.T
	dir      string // the working directory: the node's ./data is here
	env      []string
	natsAddr string // the node's real listen addresses
	httpAddr string
	ports    map[string]string // a guide's port (14000–17999) → the free one used
	bg       []int             // process groups of background commands
}

// guidePortRe matches a guide's own port: 127.0.0.1:P or localhost:P with P
// in 14000–17999.
var guidePortRe = regexp.MustCompile(`\b(127\.0\.0\.1|localhost):(1[4-7][0-9]{3})\b`)

// mapPorts gives each guide port in cmd a free port (the same one every time
// it is named) and returns cmd with them.
func (e *readmeEnv) mapPorts(cmd string) string {
	return guidePortRe.ReplaceAllStringFunc(cmd, func(m string) string {
		host, port, _ := strings.Cut(m, ":")
		real, ok := e.ports[port]
		if !ok {
			real = strconv.Itoa(natstest.Ports(e.t, 1)[0])
			e.ports[port] = real
		}
		return host + ":" + real
	})
}

// normalize maps the real addresses in out back to the README's defaults
// and the guides' ports.
func (e *readmeEnv) normalize(out string) string {
	out = strings.ReplaceAll(out, e.natsAddr, "127.0.0.1:4222")
	out = strings.ReplaceAll(out, e.httpAddr, "127.0.0.1:8080")
	for shown, real := range e.ports {
		for _, host := range []string{"127.0.0.1:", "localhost:"} {
			out = strings.ReplaceAll(out, host+real, host+shown)
		}
	}
	return out
}

func (e *readmeEnv) run(ctx context.Context, cmd string) (stdout, stderr string, err error) {
	cmd = e.mapPorts(cmd)
	c := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", cmd)
	c.Dir, c.Env = e.dir, e.env
	// Its own process group, so what a background command started can be
	// stopped at the end; and a background command that kept stdout open
	// does not hold the test for ever.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.WaitDelay = 5 * time.Second
	var o, s bytes.Buffer
	c.Stdout, c.Stderr = &o, &s
	err = c.Start()
	if err == nil {
		if strings.HasSuffix(strings.TrimSpace(cmd), "&") {
			e.bg = append(e.bg, c.Process.Pid)
		}
		err = c.Wait()
	}
	return e.normalize(o.String()), s.String(), err
}

// logTails is the end of each *.log a guide's background command wrote in
// the working directory, for a failure's message.
func (e *readmeEnv) logTails() string {
	logs, _ := filepath.Glob(filepath.Join(e.dir, "*.log"))
	var b strings.Builder
	for _, l := range logs {
		raw, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		lines = lines[max(0, len(lines)-15):]
		fmt.Fprintf(&b, "\n%s (last lines):\n  %s", filepath.Base(l), strings.Join(lines, "\n  "))
	}
	return e.normalize(b.String())
}

// stopBackground stops what background commands started: SIGTERM to each
// group, then SIGKILL to what is left after a grace period.
func (e *readmeEnv) stopBackground() {
	alive := func(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }
	for _, pgid := range e.bg {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, pgid := range e.bg {
		for alive(pgid) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// natsCLI returns the directory of a nats CLI: the one on PATH, else one
// installed from the module proxy into the test binary's temp dir.
func natsCLI(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nats"); err == nil {
		return filepath.Dir(p)
	}
	dir := filepath.Join(filepath.Dir(binary), "natscli")
	if _, err := os.Stat(filepath.Join(dir, "nats")); err == nil {
		return dir
	}
	natstest.GoInstall(t, "the README uses the nats CLI and none is on PATH; install natscli "+natscliVersion,
		"github.com/nats-io/natscli", "github.com/nats-io/natscli/nats", natscliVersion, dir)
	return dir
}

// startReadmeNode starts the node as the Quickstart does and returns where
// the README's commands run, and the lines the node printed on stdout.
func startReadmeNode(t *testing.T, needNATS bool) (*readmeEnv, []string) {
	t.Helper()
	dir := t.TempDir()
	e := &readmeEnv{t: t, dir: dir, natsAddr: freeAddr(t), httpAddr: freeAddr(t), ports: map[string]string{}}
	t.Cleanup(e.stopBackground) // runs after the node's cleanup below: LIFO
	bin := filepath.Join(dir, ".bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	goShim := `#!/bin/sh
if [ "$1" = run ] && [ "$2" = ./cmd/node ]; then shift 2; exec "$README_TEST_ESJET" "$@"; fi
echo "readme test: only 'go run ./cmd/node …' runs here; mark the block <!-- readme-test: skip (why) -->" >&2
exit 127
`
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(goShim), 0o755); err != nil {
		t.Fatal(err)
	}
	clients, err := filepath.Abs("../clients")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(clients, filepath.Join(dir, "clients")); err != nil {
		t.Fatal(err)
	}
	curlrc := fmt.Sprintf("fail-with-body\nconnect-to = localhost:8080:%[1]s\nconnect-to = 127.0.0.1:8080:%[1]s\n", e.httpAddr)
	if err := os.WriteFile(filepath.Join(dir, ".curlrc"), []byte(curlrc), 0o644); err != nil {
		t.Fatal(err)
	}
	path := bin
	if needNATS {
		path += ":" + natsCLI(t)
	}
	e.env = cleanEnv(
		"PATH="+path+":"+os.Getenv("PATH"),
		"HOME="+dir, "CURL_HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, ".config"),
		"NATS_URL=nats://"+e.natsAddr,
		"README_TEST_ESJET="+binary,
		"ESJET_NATS_EMBEDDED_LISTEN="+e.natsAddr, "ESJET_HTTP_LISTEN="+e.httpAddr,
		"PYTHONDONTWRITEBYTECODE=1", // no __pycache__ written into the repository's clients/python
	)

	cmd := exec.Command(binary) // `go run ./cmd/node`: esjet run with the defaults
	cmd.Dir, cmd.Env = dir, e.env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr natstest.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("node after SIGINT: %v\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("node still running 30s after SIGINT")
		}
	})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var printed []string
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("node exited before ready:\n%s", stderr.String())
			}
			printed = append(printed, e.normalize(l))
			if strings.Contains(l, " ready: ") {
				go func() {
					for range lines {
					}
				}()
				return e, printed
			}
		case <-timeout:
			t.Fatalf("node not ready within 60s:\n%s", stderr.String())
		}
	}
}

// TestReadmeCommands runs the README's shell blocks in order against a fresh
// node and checks the outputs they show (conventions at the top of this file).
func TestReadmeCommands(t *testing.T) {
	blocks := readmeAndDocs(t)
	needNATS := false
	for _, b := range blocks {
		for _, c := range b.commands {
			if !strings.HasPrefix(b.marker, "skip") && regexp.MustCompile(`(^|\s)nats\s`).MatchString(c.text) {
				needNATS = true
			}
		}
	}
	e, printed := startReadmeNode(t, needNATS)
	ran := 0
	for _, b := range blocks {
		switch {
		case strings.HasPrefix(b.marker, "skip"):
			if !regexp.MustCompile(`^skip \(.+\)$`).MatchString(b.marker) {
				t.Errorf("%s:%d: a skip marker says why: <!-- readme-test: skip (reason) -->, not %q", b.file, b.line, b.marker)
			}
			t.Logf("%s:%d: not run: %s", b.file, b.line, b.marker)
			continue
		case b.marker == "node output":
			checkNodeOutput(t, b, printed)
			continue
		case strings.HasPrefix(b.marker, "file "):
			name := strings.TrimSpace(strings.TrimPrefix(b.marker, "file "))
			if name == "" || filepath.Base(name) != name {
				t.Fatalf("%s:%d: a file marker names a file of the working directory: <!-- readme-test: file NAME -->, not %q", b.file, b.line, b.marker)
			}
			if err := os.WriteFile(filepath.Join(e.dir, name), []byte(e.mapPorts(b.text)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			continue
		case b.marker != "":
			t.Errorf("%s:%d: unknown marker %q (use skip (reason), node output or file NAME)", b.file, b.line, b.marker)
			continue
		}
		for _, c := range b.commands {
			runReadmeCommand(t, e, c)
			ran++
		}
	}
	if ran == 0 {
		t.Fatal("no README command ran")
	}
	t.Logf("ran %d README commands", ran)
}

// readmeAndDocs parses README.md, then every docs/*.md in name order: the
// guides' blocks run after the README's, against the same node.
func readmeAndDocs(t *testing.T) []readmeBlock {
	t.Helper()
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var all []readmeBlock
	for _, path := range append([]string{"../README.md"}, docs...) {
		file := strings.TrimPrefix(path, "../")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parseReadme(string(raw))
		if err != nil {
			t.Fatal(file + strings.TrimPrefix(err.Error(), "README.md"))
		}
		for i := range blocks {
			blocks[i].file = file
			for j := range blocks[i].commands {
				blocks[i].commands[j].file = file
			}
		}
		all = append(all, blocks...)
	}
	return all
}

func checkNodeOutput(t *testing.T, b readmeBlock, printed []string) {
	t.Helper()
	for _, shown := range strings.Split(strings.TrimSpace(b.text), "\n") {
		re := outputPattern(shown)
		found := false
		for _, l := range printed {
			if re.MatchString(squeeze(l)) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s:%d: the node does not print\n  %s\nit printed:\n  %s", b.file, b.line, shown, strings.Join(printed, "\n  "))
		}
	}
}

func runReadmeCommand(t *testing.T, e *readmeEnv, c readmeCommand) {
	t.Helper()
	var re *regexp.Regexp
	if c.expect != "" {
		re = outputPattern(c.expect)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		// Three minutes: a wait for a cluster's nodes on a loaded machine.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		stdout, stderr, err := e.run(ctx, c.text)
		cancel()
		if showsStatus(c.text) && exitCode(err) == 22 { // curl's "HTTP error", shown
			err = nil
		}
		if err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) || !readsOnly(c.text) || time.Now().After(deadline) {
				t.Fatalf("%s:%d: %s\nfailed: %v\nstdout:\n%s\nstderr:\n%s%s", c.file, c.line, c.text, err, stdout, stderr, e.logTails())
			}
		} else if re == nil || re.MatchString(squeeze(stdout)) {
			return
		} else if !readsOnly(c.text) || time.Now().After(deadline) {
			t.Fatalf("%s:%d: %s\nshows  %s\nprints %s\nstderr:\n%s", c.file, c.line, c.text, c.expect, stdout, stderr)
		}
		time.Sleep(500 * time.Millisecond) // the saga moves on its own; poll the read again
	}
}

// TestReadmeParse pins the conventions above on a small README.
func TestReadmeParse(t *testing.T) {
	md := "intro\n```sh\ncurl -s x/readyz   # → {\"status\":\"ready\"}\ncurl -s -XPOST x \\\n  -d '{}'\n# → {\"a\": 1,\n#    \"b\": …}\n# prose\n```\n" +
		"<!-- readme-test: skip (needs a cluster) -->\n```sh\nnats stream ls\n```\n```go\nx := 1\n```\n<!-- readme-test: node output -->\n```\nready\n```\n"
	blocks, err := parseReadme(md)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 || blocks[1].marker != "skip (needs a cluster)" || blocks[2].marker != "node output" {
		t.Fatalf("blocks = %+v", blocks)
	}
	cmds := blocks[0].commands
	if len(cmds) != 2 || cmds[0].expect != `{"status":"ready"}` || cmds[1].text != "curl -s -XPOST x \\\n  -d '{}'" || cmds[1].expect != `{"a": 1,"b": …}` {
		t.Fatalf("commands = %+v", cmds)
	}
	if !outputPattern(cmds[1].expect).MatchString(squeeze("{\n  \"a\": 1,\n  \"b\": [2, 3]\n}")) {
		t.Error("pattern does not match pretty JSON")
	}
	if outputPattern(cmds[1].expect).MatchString(squeeze(`{"a": 2, "b": 3}`)) {
		t.Error("pattern matches a different value")
	}
	for cmd, want := range map[string]bool{
		"curl -s localhost:8080/v1/trip/t1": true, "curl -s -XPOST localhost:8080/v1/trip/t1/request_trip": false,
		"go run ./cmd/node events trip t2": true, "go run ./cmd/node dlq ls": true, "go run ./cmd/node dlq retry trip:t2:2:0": false,
		"go run ./cmd/node reconcile": true, "go run ./cmd/node reconcile --repair": false, "nats req esjet.demo.trip.t4.state ''": true,
		"nats req esjet.demo.trip.t4.request_trip '{}'": false, "go run ./cmd/node send trip t5 request_trip '{}'": false,
	} {
		if got := readsOnly(cmd); got != want {
			t.Errorf("readsOnly(%q) = %v, want %v", cmd, got, want)
		}
	}
}

// TestReadmeGuidePorts pins the port rule: a guide's port (14000–17999 after
// 127.0.0.1: or localhost:) gets one free port wherever it is named, nothing
// else is touched, and outputs show the guide's port again.
func TestReadmeGuidePorts(t *testing.T) {
	e := &readmeEnv{t: t, natsAddr: "192.0.2.1:4222", httpAddr: "192.0.2.1:8080", ports: map[string]string{}}
	cmd := e.mapPorts(`--listen 127.0.0.1:14222 --url nats://localhost:14222 -d '{"budget":15000}' 127.0.0.1:4222 127.0.0.1:18080 x:14223`)
	real := e.ports["14222"]
	if real == "" || real == "14222" || len(e.ports) != 1 {
		t.Fatalf("ports = %v", e.ports)
	}
	want := `--listen 127.0.0.1:` + real + ` --url nats://localhost:` + real + ` -d '{"budget":15000}' 127.0.0.1:4222 127.0.0.1:18080 x:14223`
	if cmd != want {
		t.Fatalf("mapped\n  %s\nwant\n  %s", cmd, want)
	}
	if again := e.mapPorts("127.0.0.1:14222"); again != "127.0.0.1:"+real {
		t.Fatalf("named again: %s", again)
	}
	if out := e.normalize("listening on 127.0.0.1:" + real); out != "listening on 127.0.0.1:14222" {
		t.Fatalf("normalized: %s", out)
	}
}
