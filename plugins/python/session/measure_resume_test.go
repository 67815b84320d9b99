package session

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestMeasureResume prints what an idle stop's checkpoint and the next run's restore cost
// (TOOLHOST_MEASURE=1; no assertions on time): the first run after the stop, p50 of 10, and the
// checkpoint's size. The debug log has each step (the checkpoint; the disk's mount, the
// checkpoint's check and runsc restore).
func TestMeasureResume(t *testing.T) {
	if os.Getenv("TOOLHOST_MEASURE") == "" {
		t.Skip("set TOOLHOST_MEASURE=1 to measure")
	}
	ts := newSetup(t)
	m := ts.manager(t, Options{IdleStop: 300 * time.Millisecond, Log: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: testWriter{t}})})
	id := testID("measure-resume")
	cell(t, m, id, "n = 0", Run{})
	var took []time.Duration
	n := 0
	for i := 1; i <= 10; i++ {
		awaitCheckpoint(t, m, id)
		data, _ := os.ReadFile(m.manifestPath(id))
		t0 := time.Now()
		res, _, _ := cell(t, m, id, "n = globals().get('n', 0) + 1\nn", Run{})
		took = append(took, time.Since(t0))
		n++
		if !resumed(t, res) {
			n = 1 // a new interpreter (logged by resumed)
		}
		if res.Value != fmt.Sprint(n) {
			t.Fatalf("round %d: %+v", i, res)
		}
		if i == 1 {
			t.Logf("the manifest: %s", data)
		}
	}
	slices.Sort(took)
	t.Logf("the first run after an idle stop (restored): p50 %v, min %v, max %v (n=%d)", took[len(took)/2], took[0], took[len(took)-1], len(took))
}
