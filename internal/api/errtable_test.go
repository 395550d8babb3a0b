package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/esjet/esjet/internal/projection"
)

// TestEveryTableEntryAnswersItsWrappedSentinel: a sentinel wrapped in
// context gets the status and code the table gives it, whichever surface
// asks, and its message keeps no Go package prefix.
func TestEveryTableEntryAnswersItsWrappedSentinel(t *testing.T) {
	t.Parallel()
	for _, s := range sentinels {
		err := fmt.Errorf("load trip/t1: %w", s.Err)
		got := ErrorOf(err)
		first := s
		for _, e := range sentinels { // an earlier entry the error also wraps wins
			if errors.Is(err, e.Err) {
				first = e
				break
			}
		}
		if got.Status != first.Status || got.Code != first.Code {
			t.Errorf("%v: %d %s, want %d %s", err, got.Status, got.Code, first.Status, first.Code)
		}
		if got.Status < 400 || got.Code == "" || got.Code == CodeInternal {
			t.Errorf("%v: answered %d %q, which says nothing", err, got.Status, got.Code)
		}
		if goPrefix.MatchString(got.Message) {
			t.Errorf("%v: message %q keeps a Go package prefix", err, got.Message)
		}
	}
}

func TestASurfacesOwnSentinelComesFirstAndTheUnknownIsInternal(t *testing.T) {
	t.Parallel()
	mine := errors.New("console: write actions are disabled")
	if e := ErrorOf(fmt.Errorf("retry: %w", mine), Sentinel{Err: mine, Status: http.StatusForbidden, Code: CodeActionsDisabled}); e.Status != 403 ||
		e.Code != CodeActionsDisabled || e.Message != "retry: write actions are disabled" {
		t.Fatalf("own sentinel: %+v", e)
	}
	if e := ErrorOf(errors.New("something else")); e.Status != 500 || e.Code != CodeInternal {
		t.Fatalf("unknown error: %+v", e)
	}
	if e := ErrorOf(fmt.Errorf("view spend: %w", projection.ErrParked)); e.Code != CodeParked || strings.Contains(e.Message, "projection:") {
		t.Fatalf("a view's error: %+v", e)
	}
}
