package natstest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// GoInstall builds module/pkg at version with go install into gobin (what
// the test needs it for: what). It tries the module cache alone first (its
// download directory serves as a module proxy whose files were verified
// when they were downloaded; GOPROXY=off would not do, go install
// pkg@version looks up the module's deprecation). If that is not enough and
// the module proxy does not answer within seconds, the test fails in one
// line saying so, rather than after a long hang or with go's whole output.
func GoInstall(tb testing.TB, what, module, pkg, version, gobin string) {
	tb.Helper()
	tmp, err := os.MkdirTemp(os.TempDir(), "esjet-go-install-")
	if err != nil {
		tb.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	install := func(env ...string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		build := exec.CommandContext(ctx, "go", "install", pkg+"@"+version)
		build.Dir = tmp // outside any module: go install pkg@version ignores it anyway
		build.Env = append(os.Environ(), append([]string{"GOBIN=" + gobin, "CGO_ENABLED=0", "GOFLAGS=-mod=mod"}, env...)...)
		out, err := build.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, lastLine(out))
		}
		return nil
	}
	modcache, _ := exec.Command("go", "env", "GOMODCACHE").Output()
	cached := "file://" + filepath.ToSlash(filepath.Join(strings.TrimSpace(string(modcache)), "cache", "download"))
	if len(bytes.TrimSpace(modcache)) > 0 && install("GOPROXY="+cached, "GOSUMDB=off") == nil {
		return
	}
	NeedModuleProxy(tb, what, module, version)
	if err := install(); err != nil {
		tb.Fatalf("%s (go install %s@%s): %v", what, pkg, version, err)
	}
}

// NeedModuleProxy fails the test in one line, within seconds, if the
// module proxy does not answer for module at version: what needs it, the
// proxy, the error.
func NeedModuleProxy(tb testing.TB, what, module, version string) {
	tb.Helper()
	out, err := exec.Command("go", "env", "GOPROXY").Output()
	if err != nil {
		tb.Fatalf("%s needs the network: go env GOPROXY: %v", what, err)
	}
	proxy, _, _ := strings.Cut(strings.TrimSpace(string(out)), ",")
	proxy, _, _ = strings.Cut(proxy, "|")
	if proxy == "off" || proxy == "" {
		tb.Fatalf("%s needs the module proxy, and GOPROXY=%s", what, strings.TrimSpace(string(out)))
	}
	if !strings.HasPrefix(proxy, "http") {
		return // direct: go fetches from the origin itself
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u := strings.TrimSuffix(proxy, "/") + "/" + module + "/@v/" + version + ".info"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		tb.Fatalf("%s needs the module proxy: %v", what, err)
	}
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		tb.Fatalf("%s needs the module proxy, which does not answer: %v", what, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("%s needs the module proxy: %s answered %s", what, u, resp.Status)
	}
}

// lastLine is the last non-empty line of out.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
