package sessions

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestPlaceOnce: hosts placing one conversation at once all read the same
// holder, the first to place it; deleting the session frees its place.
func TestPlaceOnce(t *testing.T) { eachDB(t, testPlaceOnce) }

func testPlaceOnce(t *testing.T, db testDB) {
	ctx := context.Background()
	stores := hostStores(t, db, 3)
	holders := make([]string, 12)
	var wg sync.WaitGroup
	for i := range holders {
		wg.Go(func() {
			h, err := stores[i%3].Place(ctx, "ed", "chat", fmt.Sprintf("web-%d", i%3))
			if err != nil {
				t.Error(err)
			}
			holders[i] = h
		})
	}
	wg.Wait()
	for i, h := range holders {
		if h == "" || h != holders[0] {
			t.Fatalf("host %d read the holder %q; another read %q", i%3, h, holders[0])
		}
	}
	if h, err := stores[0].Place(ctx, "ann", "chat", "web-2"); err != nil || h != "web-2" {
		t.Errorf("another principal's session of the same name is held by %q (%v), want web-2", h, err)
	}
	if err := stores[1].Delete(ctx, "ed", "chat"); err != nil {
		t.Fatal(err)
	}
	other := "web-0"
	if holders[0] == "web-0" {
		other = "web-1"
	}
	if h, err := stores[2].Place(ctx, "ed", "chat", other); err != nil || h != other {
		t.Errorf("after the session was deleted it is held by %q (%v), want %q, the host that used it next", h, err, other)
	}
}

// TestUnusedOfAHost: a host sharing the store expires only the sessions it
// holds, or that no host holds; another host's are its to expire.
func TestUnusedOfAHost(t *testing.T) { eachDB(t, testUnusedOfAHost) }

func testUnusedOfAHost(t *testing.T, db testDB) {
	ctx := context.Background()
	st := db.mustOpen(t)
	t0 := time.Now().Add(-time.Hour).UTC()
	for _, name := range []string{"mine", "theirs", "nobodys"} {
		if _, _, err := st.Touch(ctx, "ed", name, BackendID("ed", name), "none", t0); err != nil {
			t.Fatal(err)
		}
	}
	for name, host := range map[string]string{"mine": "web-1", "theirs": "web-2"} {
		if _, err := st.Place(ctx, "ed", name, host); err != nil {
			t.Fatal(err)
		}
	}
	names := func(hostID string) []string {
		old, err := st.Unused(ctx, time.Now(), hostID)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, se := range old {
			out = append(out, se.ID)
		}
		slices.Sort(out)
		return out
	}
	if got := names("web-1"); !slices.Equal(got, []string{"mine", "nobodys"}) {
		t.Errorf("web-1 would expire %v, want [mine nobodys]", got)
	}
	if got := names(""); len(got) != 3 {
		t.Errorf("a host alone would expire %v, want all three", got)
	}
}
