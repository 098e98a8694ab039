package cmpp_test

import (
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/delivery/cmpp"
)

func TestMsgIDLayout(t *testing.T) {
	p := cmpp.MsgIDParts{Month: 12, Day: 31, Hour: 23, Minute: 59, Second: 58, Gateway: cmpp.MaxGatewayID, Seq: 65535}
	id := cmpp.MakeMsgID(p)
	if got := id.Parts(); got != p {
		t.Fatalf("parts %+v, want %+v", got, p)
	}
	// Bit positions from the spec: month in bits 64-61, the sequence in 16-1.
	one := cmpp.MakeMsgID(cmpp.MsgIDParts{Month: 1})
	if one != 1<<60 {
		t.Errorf("month 1 = %#x", uint64(one))
	}
	if g := cmpp.MakeMsgID(cmpp.MsgIDParts{Gateway: 1}); g != 1<<16 {
		t.Errorf("gateway 1 = %#x", uint64(g))
	}
	if s := cmpp.MakeMsgID(cmpp.MsgIDParts{Second: 1}); s != 1<<38 {
		t.Errorf("second 1 = %#x", uint64(s))
	}
	if got := id.String(); got != "1231235958419430365535" {
		t.Errorf("display %s", got)
	}
	at := id.Time(2026, time.UTC)
	if at != time.Date(2026, 12, 31, 23, 59, 58, 0, time.UTC) {
		t.Errorf("time %s", at)
	}
}

func TestMsgIDGeneratorClockAndGateway(t *testing.T) {
	loc := time.FixedZone("CST", 8*3600)
	g, err := cmpp.NewMsgIDGenerator(123456, loc)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 8, 14, 9, 30, 15, 0, time.UTC) // 17:30:15 in CST
	cmpp.SetGeneratorClock(g, func() time.Time { return now })
	first, second := g.Next().Parts(), g.Next().Parts()
	want := cmpp.MsgIDParts{Month: 8, Day: 14, Hour: 17, Minute: 30, Second: 15, Gateway: 123456}
	if first != want {
		t.Errorf("first %+v, want %+v", first, want)
	}
	want.Seq = 1
	if second != want {
		t.Errorf("second %+v", second)
	}
	now = now.Add(time.Second)
	if p := g.Next().Parts(); p.Second != 16 || p.Seq != 0 {
		t.Errorf("new second did not restart the sequence: %+v", p)
	}
	if _, err := cmpp.NewMsgIDGenerator(cmpp.MaxGatewayID+1, nil); err == nil {
		t.Error("gateway id over 22 bits accepted")
	}
}

// A second's 65,536 ids used up, or the clock stepping back, never repeats
// an id: the generator runs a logical clock ahead.
func TestMsgIDGeneratorOverflowAndClockStep(t *testing.T) {
	g, _ := cmpp.NewMsgIDGenerator(1, time.UTC)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cmpp.SetGeneratorClock(g, func() time.Time { return now })
	last := cmpp.MsgID(0)
	seen := map[cmpp.MsgID]bool{}
	for i := range 65536 + 10 {
		id := g.Next()
		if id <= last || seen[id] {
			t.Fatalf("id %d: %s not above %s", i, id, last)
		}
		seen[id], last = true, id
	}
	if p := last.Parts(); p.Second != 1 || p.Seq != 9 {
		t.Errorf("after overflow %+v, want second 1 seq 9", p)
	}
	now = now.Add(-time.Hour)
	if id := g.Next(); id <= last {
		t.Errorf("clock step back gave %s after %s", id, last)
	}
}

func TestMsgIDGeneratorConcurrent(t *testing.T) {
	g, _ := cmpp.NewMsgIDGenerator(7, nil)
	const workers, each = 8, 2000
	out := make(chan cmpp.MsgID, workers*each)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				out <- g.Next()
			}
		})
	}
	wg.Wait()
	close(out)
	seen := map[cmpp.MsgID]bool{}
	for id := range out {
		if seen[id] {
			t.Fatalf("duplicate %s", id)
		}
		seen[id] = true
	}
}
