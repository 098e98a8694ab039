package delivery

import (
	"testing"
	"time"
)

// TestDecideItem is the requeue item's decision table: skips
// never send, waits are waits, a delivered record is re-sent only when
// frozen delivered and untouched, and the item's own attempt is
// recognized by its token.
func TestDecideItem(t *testing.T) {
	now := time.Now()
	snap := now.Add(-time.Minute)
	app := &Application{ID: 1, Status: AppEnabled, ReportEnabled: true, MOEnabled: true, Protocol: ProtoCMPP30}
	off := &Application{ID: 1, Status: AppDisabled, ReportEnabled: true, Protocol: ProtoCMPP30}
	sub := int64(5)
	later := now.Add(time.Second)
	past := now.Add(-time.Second)
	rec := func(st Status, mod func(*Record)) *Record {
		r := &Record{ID: 9, Kind: KindReport, AppID: 1, SubmitID: &sub, Payload: []byte(`{}`), Status: st, Version: 4,
			CreatedAt: snap.Add(-time.Hour), ConnID: "c1"}
		if mod != nil {
			mod(r)
		}
		return r
	}
	args := func(st Status) *RequeueArgs {
		return &RequeueArgs{DeliveryID: 9, AppID: 1, FrozenStatus: st, FrozenVersion: 4, SnapshotAt: snap}
	}
	const job, batch = 77, 3
	for name, c := range map[string]struct {
		r    *Record
		app  *Application
		args *RequeueArgs
		kind verdictKind
		code string
	}{
		"missing record":             {nil, app, args(StatusFailed), vSkip, SkipIncompleteData},
		"after the snapshot":         {rec(StatusFailed, func(r *Record) { r.CreatedAt = now }), app, args(StatusFailed), vSkip, SkipNotInSnapshot},
		"failed: send":               {rec(StatusFailed, nil), app, args(StatusFailed), vSend, ""},
		"pending: send":              {rec(StatusPending, nil), app, args(StatusFailed), vSend, ""},
		"app disabled":               {rec(StatusFailed, nil), off, args(StatusFailed), vSkip, SkipAppDisabled},
		"app gone":                   {rec(StatusFailed, nil), nil, args(StatusFailed), vSkip, SkipAppDisabled},
		"no payload":                 {rec(StatusFailed, func(r *Record) { r.Payload = nil }), app, args(StatusFailed), vSkip, SkipIncompleteData},
		"no mapping":                 {rec(StatusFailed, func(r *Record) { r.SubmitID = nil }), app, args(StatusFailed), vSkip, SkipNoSubmitMapping},
		"MO needs no mapping":        {rec(StatusFailed, func(r *Record) { r.Kind, r.SubmitID = KindMO, nil }), app, args(StatusFailed), vSend, ""},
		"other attempt awaiting":     {rec(StatusAwaitingACK, func(r *Record) { r.SendToken, r.AckDeadline = "j1", &later }), app, args(StatusFailed), vWaitExternal, ""},
		"frozen delivered":           {rec(StatusDelivered, nil), app, args(StatusDelivered), vSend, ""},
		"frozen delivered, disabled": {rec(StatusDelivered, nil), off, args(StatusDelivered), vSkip, SkipAppDisabled},
		"confirmed after creation":   {rec(StatusDelivered, nil), app, args(StatusFailed), vSkip, SkipConfirmedLater},
		"delivered by other task":    {rec(StatusDelivered, func(r *Record) { r.SendBatchID = 2 }), app, args(StatusFailed), vSkip, SkipOtherTask},
		"redelivered after freeze":   {rec(StatusDelivered, func(r *Record) { r.Version, r.SendBatchID = 6, 2 }), app, args(StatusDelivered), vSkip, SkipOtherTask},
		"this task, other item":      {rec(StatusDelivered, func(r *Record) { r.SendBatchID = batch }), app, args(StatusFailed), vSkip, SkipAlreadySucceeded},
		"unknown status":             {rec("weird", nil), app, args(StatusFailed), vSkip, SkipStateChanged},
		"own attempt awaiting":       {rec(StatusAwaitingACK, func(r *Record) { r.SendToken, r.AckDeadline = tokenOf(job), &later }), app, args(StatusFailed), vAwaitOwn, ""},
		"own attempt past deadline":  {rec(StatusAwaitingACK, func(r *Record) { r.SendToken, r.AckDeadline = tokenOf(job), &past }), app, args(StatusFailed), vTimeoutOwn, ""},
		"own attempt delivered":      {rec(StatusDelivered, func(r *Record) { r.SendToken = tokenOf(job) }), app, args(StatusFailed), vSucceed, ""},
		"own attempt rejected":       {rec(StatusRejected, func(r *Record) { r.SendToken, r.LastErrorClass = tokenOf(job), ClassAckRejected }), app, args(StatusFailed), vFail, ""},
		"own attempt reverted": {rec(StatusFailed, func(r *Record) {
			r.SendToken, r.PrevStatus = tokenOf(job), StatusFailed
			r.Status = StatusPending
			r.ConnID = ""
		}), app, args(StatusFailed), vSend, ""},
		"own attempt reverted, back to unconfirmed": {rec(StatusUnconfirmed, func(r *Record) { r.SendToken, r.ConnID = tokenOf(job), "" }), app, args(StatusUnconfirmed), vSend, ""},
	} {
		v := decideItem(c.r, c.app, c.args, job, batch, now)
		if v.kind != c.kind || v.code != c.code {
			t.Errorf("%s: verdict %d %q, want %d %q", name, v.kind, v.code, c.kind, c.code)
		}
		if v.kind == vSend && (len(v.from) != 1 || v.from[0] != c.r.Status || v.version != c.r.Version) {
			t.Errorf("%s: sends from %v at %d", name, v.from, v.version)
		}
	}
}

// TestDecidePush: a push job sends only a pending record; anything else
// is another attempt's business.
func TestDecidePush(t *testing.T) {
	now := time.Now()
	app := &Application{ID: 1, Status: AppEnabled, ReportEnabled: true, MOEnabled: true}
	sub := int64(1)
	r := &Record{ID: 1, Kind: KindReport, SubmitID: &sub, Payload: []byte(`{}`), Status: StatusPending, Version: 2}
	if v := decidePush(r, app, 5, now); v.kind != vSend || v.version != 2 {
		t.Fatalf("pending: %+v", v)
	}
	r.Status = StatusDelivered
	if v := decidePush(r, app, 5, now); v.kind != vSkip || v.code != SkipAlreadyDelivered {
		t.Fatalf("delivered: %+v", v)
	}
	r.Status = StatusAwaitingACK
	if v := decidePush(r, app, 5, now); v.kind != vSkip || v.code != SkipHandledElsewhere {
		t.Fatalf("awaiting another attempt: %+v", v)
	}
	r.Status, r.SendToken, r.ConnID = StatusDelivered, tokenOf(5), "c1"
	if v := decidePush(r, app, 5, now); v.kind != vSucceed {
		t.Fatalf("own delivered: %+v", v)
	}
}
