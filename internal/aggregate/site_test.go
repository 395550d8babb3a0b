package aggregate

import (
	"errors"
	"strings"
	"testing"
)

func TestSitesRefuseWritesOwnedElsewhereAndSayWhereToSend(t *testing.T) {
	owner := func(typ, id string) string {
		if site, _, ok := strings.Cut(id, "-"); ok {
			return site
		}
		return ""
	}
	for _, c := range []struct {
		rule   Sites
		id     string
		refuse bool
		says   string
	}{
		{Sites{}, "s2-1", false, ""}, // no fleet: every write
		{Sites{Here: "s1", OwnerOf: owner}, "s1-1", false, ""},
		{Sites{Here: "s1", OwnerOf: owner}, "s2-1", true, "send the command to site s2"},
		{Sites{Here: "s1", OwnerOf: owner}, "plain", true, `give its id the prefix "s1-"`},
		{Sites{Hub: true, OwnerOf: owner}, "s1-1", true, "not at the hub"},
		{Sites{Hub: true, OwnerOf: owner}, "plain", true, "owned by no site and the hub records no decisions"},
	} {
		err := c.rule.check("order", c.id)
		if !c.refuse {
			if err != nil {
				t.Errorf("%+v writing order/%s: %v, want allowed", c.rule, c.id, err)
			}
			continue
		}
		if !errors.Is(err, ErrWrongSite) || !IsPermanent(err) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "Nothing was written") {
			t.Errorf("%+v writing order/%s: %v, want a permanent ErrWrongSite saying %q", c.rule, c.id, err, c.says)
		}
	}
}
