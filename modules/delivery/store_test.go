package delivery

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsqlite"
)

// TestStore runs every statement of the store on both dialects: the
// conditional transitions (claim from allowed statuses and version,
// conclude only under the same token, revert, requeue, fail unsent), the
// filter (each term, Beijing days, keyword escaping) and presence.
func TestStore(t *testing.T) {
	t.Parallel()
	opts := &testdb.Options{Lines: Lines}
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		d, _ := testdb.OpenPostgres(t, opts)
		testStore[pgx.Tx](t, keelsql.Pgx(d.Pool()), d)
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		d, _ := testdb.OpenSQLite(t, opts)
		testStore[*sql.Tx](t, keelsql.SQLite(d.DB()), d)
	})
}

var (
	_ keeldriver.Driver[pgx.Tx]  = (*keelpgx.Driver)(nil)
	_ keeldriver.Driver[*sql.Tx] = (*keelsqlite.Driver)(nil)
)

func testStore[TTx any](t *testing.T, db keelsql.DB[TTx], _ any) {
	ctx := context.Background()
	st, err := newStore(db)
	if err != nil {
		t.Fatal(err)
	}
	ent, err := st.insertEnterprise(ctx, db, "华星科技")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := st.insertEnterprise(ctx, db, "Other_Co")
	appA, err := st.insertApp(ctx, db, &NewApplication{EnterpriseID: ent, Name: "短信通知", Account: "900001", Secret: "s",
		Protocol: ProtoCMPP30, ReportEnabled: true, MOEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	appB, _ := st.insertApp(ctx, db, &NewApplication{EnterpriseID: other, Name: "b", Account: "b-http", Secret: "s",
		Protocol: ProtoHTTP, PushURL: "http://x", Rate: 5})
	apps, err := st.apps(ctx)
	if err != nil || len(apps) != 2 || apps[0].EnterpriseName != "华星科技" || apps[1].Rate != 5 || apps[0].Rate != DefaultAppRate {
		t.Fatalf("apps: %v %+v", err, apps)
	}
	sub := &Submit{AppID: appA, MsgID: "123", Phones: []string{"13800000000"}, Content: []byte{1, 2}, WantReport: true}
	if ok, err := st.insertSubmit(ctx, db, sub); err != nil || !ok {
		t.Fatalf("submit: %v", err)
	}
	if ok, _ := st.insertSubmit(ctx, db, &Submit{AppID: appA, MsgID: "123", Phones: []string{"1"}, Content: []byte{}}); ok {
		t.Fatal("duplicate submit inserted")
	}
	if err := st.setUpstream(ctx, sub.ID, "u-1"); err != nil {
		t.Fatal(err)
	}
	if got, err := st.submitByUpstream(ctx, db, "u-1"); err != nil || got.ID != sub.ID || string(got.Content) != "\x01\x02" {
		t.Fatalf("by upstream: %v %+v", err, got)
	}

	// 2026-08-12 23:30 and 2026-08-13 00:10 Beijing time: different days.
	late := time.Date(2026, 8, 12, 23, 30, 0, 0, Beijing)
	early := time.Date(2026, 8, 13, 0, 10, 0, 0, Beijing)
	mk := func(app, ent int64, kind Kind, status Status, at time.Time, phone, key string, withSub bool) int64 {
		t.Helper()
		var sid *int64
		if withSub {
			sid = &sub.ID
		}
		id, ok, err := st.insertRecord(ctx, db, &NewRecord{Kind: kind, AppID: app, EnterpriseID: ent, SubmitID: sid,
			MsgID: "m-" + key, Phone: phone, Payload: &ReportPayload{Stat: "DELIVRD"}, UpstreamKey: key, Status: status, CreatedAt: at})
		if err != nil || !ok {
			t.Fatalf("insert %s: %v", key, err)
		}
		return id
	}
	r1 := mk(appA, ent, KindReport, StatusPending, late, "13800000001", "k1", true)
	r2 := mk(appA, ent, KindReport, StatusFailed, early, "13800000002", "k2", true)
	r3 := mk(appB, other, KindMO, StatusAwaitingACK, early, "13900000003", "k3", false)
	r4 := mk(appA, ent, KindReport, StatusDelivered, early.Add(time.Hour), "100%_x", "k4", true)
	if _, ok, _ := st.insertRecord(ctx, db, &NewRecord{Kind: KindReport, AppID: appA, EnterpriseID: ent, MsgID: "x",
		Phone: "p", UpstreamKey: "k1"}); ok {
		t.Fatal("a repeated upstream key inserted a second record")
	}

	count := func(f Filter) int64 {
		t.Helper()
		if err := f.Validate(); err != nil {
			t.Fatal(err)
		}
		n, err := st.countRecords(ctx, &f, nil)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for name, c := range map[string]struct {
		f    Filter
		want int64
	}{
		"all":            {Filter{}, 4},
		"enterprise":     {Filter{EnterpriseID: ent}, 3},
		"app":            {Filter{AppID: appB}, 1},
		"kind":           {Filter{Kind: KindMO}, 1},
		"status":         {Filter{Status: StatusFailed}, 1},
		"day 08-12":      {Filter{DateFrom: "2026-08-12", DateTo: "2026-08-12"}, 1},
		"day 08-13":      {Filter{DateFrom: "2026-08-13"}, 3},
		"until 08-12":    {Filter{DateTo: "2026-08-12"}, 1},
		"keyword phone":  {Filter{Keyword: "0000002"}, 1},
		"keyword msg":    {Filter{Keyword: "M-K3"}, 1},
		"keyword ent":    {Filter{Keyword: "华星"}, 3},
		"keyword app":    {Filter{Keyword: "短信"}, 3},
		"keyword acct":   {Filter{Keyword: "b-http"}, 1},
		"keyword escape": {Filter{Keyword: "%_"}, 1},
		"keyword none":   {Filter{Keyword: "nothing-like-it"}, 0},
	} {
		if got := count(c.f); got != c.want {
			t.Errorf("%s: %d records, want %d", name, got, c.want)
		}
	}
	page, err := st.listRecords(ctx, &Filter{}, 2, 1)
	if err != nil || len(page) != 2 || page[0].ID != r3 || page[1].ID != r2 || page[0].AppName != "b" {
		t.Fatalf("page 2 of size 2 (newest first): %v %+v", err, page)
	}
	snap := early.Add(time.Minute)
	pv, err := st.previewRecords(ctx, &Filter{}, snap)
	if err != nil || len(pv) != 3 {
		t.Fatalf("preview at the snapshot leaves the later record out: %v %+v", err, pv)
	}
	subs, err := st.subjectPage(ctx, &Filter{}, snap.Add(2*time.Hour), 0, 10)
	if err != nil || len(subs) != 3 || subs[0].ID != r1 || subs[2].ID != r4 {
		t.Fatalf("subjects skip awaiting_ack: %v %+v", err, subs)
	}
	if next, _ := st.subjectPage(ctx, &Filter{}, snap.Add(2*time.Hour), r2, 10); len(next) != 1 || next[0].ID != r4 {
		t.Fatalf("keyset page after %d: %+v", r2, next)
	}

	// Claim: only from the named statuses at the named version.
	deadline := time.Now().Add(time.Minute)
	c := &claim{ID: r2, From: []Status{StatusPending}, Sender: "push", Token: "j1", JobID: 1, ConnID: "c1", OuterID: "77", Deadline: deadline}
	if _, err := st.claimRecord(ctx, c); !isNoRows(err) {
		t.Fatalf("claim of a failed record from pending: %v", err)
	}
	c.From, c.Version = []Status{StatusFailed}, 99
	if _, err := st.claimRecord(ctx, c); !isNoRows(err) {
		t.Fatalf("claim at a stale version: %v", err)
	}
	c.Version = 1
	rec, err := st.claimRecord(ctx, c)
	if err != nil || rec.Status != StatusAwaitingACK || rec.PrevStatus != StatusFailed || rec.Version != 2 ||
		rec.SendToken != "j1" || rec.DeliverMsgID != "77" || rec.Attempts != 1 || rec.AckDeadline == nil {
		t.Fatalf("claim: %v %+v", err, rec)
	}
	// A report without its Submit mapping is never claimed.
	orphan := mk(appA, ent, KindReport, StatusPending, late.Add(-time.Hour), "1", "k5", false)
	if _, err := st.claimRecord(ctx, &claim{ID: orphan, From: []Status{StatusPending}, Token: "j9", Deadline: deadline}); !isNoRows(err) {
		t.Fatalf("claim of a report without its mapping: %v", err)
	}
	if err := st.setSeq(ctx, r2, "j1", 42); err != nil {
		t.Fatal(err)
	}
	res := int64(0)
	done, err := st.finishMany(ctx, []outcome{
		{ID: r2, Token: "other", Status: StatusDelivered},
		{ID: r1, Token: "j1", Status: StatusDelivered},
	})
	if err != nil || len(done) != 0 {
		t.Fatalf("outcomes under a foreign token or of an unclaimed record changed something: %v %v", err, done)
	}
	done, err = st.finishMany(ctx, []outcome{{ID: r2, Token: "j1", Status: StatusDelivered, Result: &res, Acked: true}})
	if err != nil || !done[r2] {
		t.Fatalf("outcome: %v %v", err, done)
	}
	rec, _ = st.record(ctx, r2)
	if rec.Status != StatusDelivered || rec.Seq == nil || *rec.Seq != 42 || rec.AckedAt == nil || rec.Version != 3 {
		t.Fatalf("delivered: %+v", rec)
	}
	if done, _ := st.finishMany(ctx, []outcome{{ID: r2, Token: "j1", Status: StatusRejected}}); len(done) != 0 {
		t.Fatal("a second outcome of the same attempt applied")
	}
	var hist []map[string]any
	if err := json.Unmarshal(rec.History, &hist); err != nil || len(hist) != 3 || hist[1]["event"] != "claimed" || hist[2]["event"] != "delivered" {
		t.Fatalf("history: %v %s", err, rec.History)
	}

	// Batched claims: each row keeps its own conditions; of two claims of
	// one record, exactly one wins.
	r6 := mk(appA, ent, KindReport, StatusRejected, late, "6", "k6", true)
	r7 := mk(appB, other, KindMO, StatusFailed, late, "7", "k7", false)
	batch := []claimReq{
		{c: &claim{ID: r6, From: []Status{StatusRejected}, Token: "jA", ConnID: "c2", OuterID: "5", Deadline: deadline}},
		{c: &claim{ID: r6, From: []Status{StatusRejected}, Token: "jB", ConnID: "c2", OuterID: "6", Deadline: deadline}},
		{c: &claim{ID: r7, From: []Status{StatusFailed}, Version: 1, Token: "jC", ConnID: "c3", OuterID: "7", Deadline: deadline}},
		{c: &claim{ID: r4, From: []Status{StatusPending}, Token: "jD", Deadline: deadline}},
	}
	got, err := st.claimMany(ctx, batch)
	if err != nil || len(got) != 2 || got[r4] != nil || (got[r6].SendToken != "jA" && got[r6].SendToken != "jB") ||
		got[r7].SendToken != "jC" || got[r7].DeliverMsgID != "m-k7" || got[r6].DeliverMsgID == "m-k6" ||
		got[r6].AckDeadline == nil || !got[r6].AckDeadline.Equal(deadline.UTC().Truncate(time.Microsecond)) {
		t.Fatalf("claimMany: %v %+v", err, got)
	}

	// Revert undoes a claim whose write never happened.
	c2 := &claim{ID: r1, From: []Status{StatusPending}, Token: "j2", ConnID: "c1", Deadline: deadline}
	if _, err := st.claimRecord(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.revert(ctx, r1, "j2", "connection closed"); err != nil || !ok {
		t.Fatalf("revert: %v %v", ok, err)
	}
	rec, _ = st.record(ctx, r1)
	if rec.Status != StatusPending || rec.Attempts != 0 || rec.ConnID != "" {
		t.Fatalf("reverted: %+v", rec)
	}
	// Requeue from an allowed status at the seen version only.
	if ok, _ := st.requeueRecord(ctx, db, r2, 1, "user:a", "again please"); ok {
		t.Fatal("requeue at a stale version")
	}
	if ok, err := st.requeueRecord(ctx, db, r2, 3, "user:a", "again please"); err != nil || !ok {
		t.Fatalf("requeue: %v", err)
	}
	if ok, _ := st.requeueRecord(ctx, db, r3, 1, "user:a", "again please"); ok {
		t.Fatal("requeued a record awaiting its ACK")
	}
	if ok, err := st.failUnsent(ctx, r1, rec.Version, "disabled", SkipAppDisabled); err != nil || !ok {
		t.Fatalf("fail unsent: %v", err)
	}

	// Presence: this instance's rows follow what it holds.
	if err := st.beat(ctx, "i1", []heldApp{{AppID: appA, Conns: 2}, {AppID: appB, Conns: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := st.beat(ctx, "i2", []heldApp{{AppID: appA, Conns: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := st.beat(ctx, "i1", []heldApp{{AppID: appA, Conns: 1}}); err != nil {
		t.Fatal(err)
	}
	live, err := st.livePresence(ctx, time.Now().Add(-time.Minute))
	// Application 0 rows mark the instances alive; appB is no longer held.
	if err != nil || len(live) != 4 || live[0].AppID != 0 || live[1].AppID != 0 || live[2].AppID != appA || live[3].AppID != appA {
		t.Fatalf("presence: %v %+v", err, live)
	}
	if live, _ := st.livePresence(ctx, time.Now().Add(time.Minute)); len(live) != 0 {
		t.Fatalf("stale presence counted: %+v", live)
	}
	if err := st.beat(ctx, "i2", nil); err != nil {
		t.Fatal(err)
	}
	if live, _ := st.livePresence(ctx, time.Now().Add(-time.Minute)); len(live) != 2 {
		t.Fatalf("a stopped instance keeps rows: %+v", live)
	}
}
