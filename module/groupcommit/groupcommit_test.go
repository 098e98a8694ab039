package groupcommit

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

type req struct {
	id        int
	lane, key string
	done      chan struct{} // closed when a batch settles it
}

func newReq(id int, lane, key string) *req {
	return &req{id: id, lane: lane, key: key, done: make(chan struct{})}
}

// harness records the batches a Group runs. Its first batch can be held
// until release, so that requests submitted meanwhile queue behind it and
// the batches they form are known in advance.
type harness struct {
	g       *Group[*req]
	again   func(batch []*req) []int // what Run hands back (nil: nothing)
	started chan struct{}            // closed when the first batch runs
	hold    chan struct{}            // the first batch waits for it

	mu      sync.Mutex
	batches [][]int
}

func newHarness(spawn bool, most int) *harness {
	h := &harness{started: make(chan struct{}), hold: make(chan struct{})}
	h.g = New(Config[*req]{
		Lanes: 1,
		Max:   most,
		Lane:  func(r *req) string { return r.lane },
		Key:   func(r *req) string { return r.key },
		Run:   h.run,
		Spawn: spawn,
	})
	return h
}

func (h *harness) run(batch []*req) []int {
	ids := make([]int, len(batch))
	for i, r := range batch {
		ids[i] = r.id
	}
	h.mu.Lock()
	first := len(h.batches) == 0
	h.batches = append(h.batches, ids)
	h.mu.Unlock()
	if first {
		close(h.started)
		<-h.hold
	}
	var again []int
	if h.again != nil {
		again = h.again(batch)
	}
	back := map[int]bool{}
	for _, i := range again {
		back[i] = true
	}
	for i, r := range batch {
		if !back[i] {
			close(r.done)
		}
	}
	return again
}

func (h *harness) ran() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprint(h.batches)
}

// queueBehind submits first, holds its batch, submits rest while it is
// held, releases it and waits until every request is settled; it returns
// the batches run.
func (h *harness) queueBehind(t *testing.T, spawn bool, first *req, rest ...*req) string {
	t.Helper()
	submitted := make(chan struct{})
	go func() {
		h.g.Submit(first)
		close(submitted)
	}()
	wait(t, h.started, "the first batch to start")
	if spawn {
		wait(t, submitted, "Submit to return while its leader runs elsewhere")
	}
	for _, r := range rest {
		h.g.Submit(r) // the lane has a leader: this only queues
	}
	if got := h.ran(); got != "[[0]]" {
		t.Fatalf("batches %s ran while the leader was held; want only [[0]]", got)
	}
	select {
	case <-submitted:
		if !spawn {
			t.Fatal("the submitter that leads returned while its lane was busy")
		}
	default:
	}
	close(h.hold)
	if !spawn {
		// The leader's Submit returns only once the lane is empty.
		wait(t, submitted, "the leader to return")
		for _, r := range append([]*req{first}, rest...) {
			select {
			case <-r.done:
			default:
				t.Fatalf("the leader returned with request %d unsettled", r.id)
			}
		}
	}
	for _, r := range append([]*req{first}, rest...) {
		wait(t, r.done, fmt.Sprintf("request %d", r.id))
	}
	return h.ran()
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("waited 10s for %s", what)
	}
}

func modes(t *testing.T, f func(t *testing.T, spawn bool)) {
	t.Run("caller leads", func(t *testing.T) { f(t, false) })
	t.Run("spawned leader", func(t *testing.T) { f(t, true) })
}

// Requests that queue while a batch runs go in the next batches in arrival
// order, Max at a time, and the counters say so.
func TestBatchesInArrivalOrder(t *testing.T) {
	modes(t, func(t *testing.T, spawn bool) {
		h := newHarness(spawn, 3)
		var rest []*req
		for i := 1; i <= 7; i++ {
			rest = append(rest, newReq(i, "L", fmt.Sprint("k", i)))
		}
		got := h.queueBehind(t, spawn, newReq(0, "L", "k0"), rest...)
		if want := "[[0] [1 2 3] [4 5 6] [7]]"; got != want {
			t.Fatalf("batches %s, want %s", got, want)
		}
		if s := h.g.Stats(); s != (Stats{Lanes: 1, Batches: 4, Requests: 8, Largest: 3}) {
			t.Fatalf("stats %+v", s)
		}
	})
}

// A batch holds one request per key; a second of a key waits for the
// next batch, keeping its place ahead of later requests.
func TestOnePerKey(t *testing.T) {
	modes(t, func(t *testing.T, spawn bool) {
		h := newHarness(spawn, 10)
		got := h.queueBehind(t, spawn, newReq(0, "L", "a"),
			newReq(1, "L", "a"), newReq(2, "L", "a"), newReq(3, "L", "b"), newReq(4, "L", "a"), newReq(5, "L", "c"), newReq(6, "L", "b"))
		if want := "[[0] [1 3 5] [2 6] [4]]"; got != want {
			t.Fatalf("batches %s, want %s", got, want)
		}
	})
}

// Requests a batch hands back run first in the next batch, in arrival
// order whatever order Run lists them in, before requests that waited
// behind them, and still one per key.
func TestHandBackGoesFirst(t *testing.T) {
	modes(t, func(t *testing.T, spawn bool) {
		h := newHarness(spawn, 3)
		handed := false
		h.again = func(batch []*req) []int {
			if handed || len(batch) != 3 {
				return nil
			}
			handed = true // only the leader calls Run: no lock needed
			return []int{2, 0}
		}
		got := h.queueBehind(t, spawn, newReq(0, "L", "k0"),
			newReq(1, "L", "k1"), newReq(2, "L", "k2"), newReq(3, "L", "k3"), newReq(4, "L", "k1"), newReq(5, "L", "k5"), newReq(6, "L", "k6"))
		if want := "[[0] [1 2 3] [1 3 5] [4 6]]"; got != want {
			t.Fatalf("batches %s, want %s", got, want)
		}
		if s := h.g.Stats(); s.Requests != 9 || s.Batches != 4 {
			t.Fatalf("stats %+v: a request handed back counts again", s)
		}
	})
}

// A leader that empties its lane gives it up: the next submitter leads.
func TestLeaderHandOff(t *testing.T) {
	modes(t, func(t *testing.T, spawn bool) {
		h := newHarness(spawn, 10)
		close(h.hold)
		for i := range 5 {
			r := newReq(i, "L", "k")
			h.g.Submit(r)
			if !spawn {
				select {
				case <-r.done:
				default:
					t.Fatalf("request %d: Submit on an idle lane returned before its batch ran", i)
				}
			}
			wait(t, r.done, fmt.Sprintf("request %d", i))
		}
		if got, want := h.ran(), "[[0] [1] [2] [3] [4]]"; got != want {
			t.Fatalf("batches %s, want %s", got, want)
		}
	})
}

// Many submitters on a few lanes: every request is settled exactly once,
// a lane runs one batch at a time, a batch stays in one lane within Max
// with one request per key, a batch takes each submitter's requests of a
// lane key in the order it submitted them, and requests of one lane and
// dedupe key run in that order across batches.
func TestConcurrentSubmitters(t *testing.T) {
	modes(t, func(t *testing.T, spawn bool) {
		const submitters, each, most = 8, 300, 8
		type sreq struct {
			*req
			from, seq int
		}
		var (
			mu      sync.Mutex
			busy    = map[*lane[*sreq]]bool{}
			last    = map[string]int{} // submitter, lane and dedupe key: last seq run
			settled = map[*sreq]int{}
			g       *Group[*sreq]
		)
		g = New(Config[*sreq]{
			Lanes: 3,
			Max:   most,
			Lane:  func(r *sreq) string { return r.lane },
			Key:   func(r *sreq) string { return r.key },
			Spawn: spawn,
			Run: func(batch []*sreq) []int {
				l := g.laneOf(batch[0].lane)
				mu.Lock()
				if busy[l] {
					t.Errorf("two batches at once in the lane of %s", batch[0].lane)
				}
				busy[l] = true
				if len(batch) > most {
					t.Errorf("batch of %d over %d", len(batch), most)
				}
				keys := map[string]bool{}
				inBatch := map[string]int{} // submitter and lane key: last seq in this batch
				for _, r := range batch {
					if g.laneOf(r.lane) != l {
						t.Errorf("batch mixes lanes: %s and %s", batch[0].lane, r.lane)
					}
					if keys[r.key] {
						t.Errorf("key %s twice in a batch", r.key)
					}
					keys[r.key] = true
					k := fmt.Sprint(r.from, "/", r.lane)
					if prev, ok := inBatch[k]; ok && prev >= r.seq {
						t.Errorf("submitter %d lane %s: %d after %d in a batch", r.from, r.lane, r.seq, prev)
					}
					inBatch[k] = r.seq
					k += "/" + r.key
					if prev, ok := last[k]; ok && prev >= r.seq {
						t.Errorf("submitter %d lane %s key %s: %d ran after %d", r.from, r.lane, r.key, r.seq, prev)
					}
					last[k] = r.seq
					settled[r]++
				}
				busy[l] = false
				mu.Unlock()
				for _, r := range batch {
					close(r.done)
				}
				return nil
			},
		})
		all := make([][]*sreq, submitters)
		var wg sync.WaitGroup
		for s := range submitters {
			for i := range each {
				all[s] = append(all[s], &sreq{req: newReq(s*each+i, fmt.Sprint("L", i%5), fmt.Sprint("k", i%12)), from: s, seq: i})
			}
			wg.Go(func() {
				for _, r := range all[s] {
					g.Submit(r)
				}
			})
		}
		wg.Wait()
		for _, rs := range all {
			for _, r := range rs {
				wait(t, r.done, fmt.Sprintf("request %d", r.id))
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(settled) != submitters*each {
			t.Fatalf("%d requests settled, want %d", len(settled), submitters*each)
		}
		for r, n := range settled {
			if n != 1 {
				t.Fatalf("request %d ran %d times", r.id, n)
			}
		}
		s := g.Stats()
		if s.Requests != submitters*each || s.Batches < submitters*each/most || s.Largest > most || s.Lanes != 3 {
			t.Fatalf("stats %+v", s)
		}
		t.Logf("%+v", s)
	})
}
