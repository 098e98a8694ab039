package inventory

import (
	"context"
	"database/sql"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/module/moduletest"
)

// TestInventoryCommands runs the module's `keel inventory` verbs against
// its API: stock, a reservation with its history and ledger, conflicts and
// the admission switch; bad input is refused before anything is sent.
func TestInventoryCommands(t *testing.T) {
	each(t, testCommands[pgx.Tx], testCommands[*sql.Tx])
}

func testCommands[TTx any](t *testing.T, e *tenv[TTx]) {
	ctx := context.Background()
	m := e.build(t, nil)
	seed(t, m, "WH1", "SKU1", 10)
	e.start(t) // the admission switch is audited through the engine
	res, err := m.Reserve(ctx, ReserveRequest{OrderLine: "L1-1", Warehouse: "WH1", SKU: "SKU1", Qty: 3})
	if err != nil {
		t.Fatal(err)
	}
	caller := &moduletest.HTTPCaller{Base: moduletest.ServeAPI(t, m.Routes(), "ops").URL}
	cli := &moduletest.CLI{API: caller, Verbs: Commands}
	run := func(args ...string) (string, error) { return cli.Run(ctx, args...) }
	out, err := run("inventory", "stock", "--warehouse", "WH1")
	if err != nil || !strings.Contains(out, "SHOWN (NOT A PROMISE)") || !strings.Contains(out, "SKU1") {
		t.Fatalf("stock: %v\n%s", err, out)
	}
	if fields := strings.Fields(strings.Split(out, "\n")[1]); len(fields) < 7 || fields[2] != "10" || fields[3] != "7" || fields[4] != "3" {
		t.Fatalf("stock row %q: want on hand 10, available 7, reserved 3", fields)
	}
	id := strconv.FormatInt(res.ReservationID, 10)
	out, err = run("inventory", "reservation", id)
	if err != nil || !strings.Contains(out, "已预占 (reserved)") || !strings.Contains(out, "order line L1-1") {
		t.Fatalf("reservation: %v\n%s", err, out)
	}
	out, err = run("inventory", "reservation", id, "--json")
	if err != nil || !json.Valid([]byte(out)) {
		t.Fatalf("reservation --json: %v\n%s", err, out)
	}
	if _, err := run("inventory", "reservation", "999999"); err == nil || !strings.Contains(err.Error(), "no reservation 999999") {
		t.Fatalf("unknown reservation: %v", err)
	}
	if out, err = run("inventory", "conflicts"); err != nil || !strings.Contains(out, "KIND") {
		t.Fatalf("conflicts: %v\n%s", err, out)
	}
	if _, err = run("inventory", "admission", "--busy", "on"); err == nil || !strings.Contains(err.Error(), "reason") {
		t.Fatalf("admission --busy on without a reason: %v", err)
	}
	if m.Admission().Over {
		t.Fatal("admission --busy on without a reason switched the watermark")
	}
	if out, err = run("inventory", "admission", "--busy", "on", "--reason", "大促峰值，手动限流"); err != nil || !strings.Contains(out, "BUSY") {
		t.Fatalf("admission --busy on: %v\n%s", err, out)
	}
	if !m.Admission().Over {
		t.Fatal("admission --busy on did not switch the watermark")
	}
	if out, err = run("inventory", "admission", "--busy", "off", "--reason", "峰值已过，恢复受理"); err != nil || !strings.Contains(out, "accepting") {
		t.Fatalf("admission --busy off: %v\n%s", err, out)
	}
	sent := caller.Sent()
	for _, args := range [][]string{
		{"inventory", "reservation", "abc"},
		{"inventory", "reservation", "0"},
		{"inventory", "conflicts", "--state", "closed"},
		{"inventory", "admission", "--busy", "maybe"},
		{"inventory", "stock", "--warehouse", "bad id with spaces"},
		{"inventory", "nonsense"},
	} {
		if _, err := run(args...); err == nil {
			t.Errorf("%s: no error", strings.Join(args, " "))
		}
	}
	if caller.Sent() != sent {
		t.Fatalf("bad input sent %d requests", caller.Sent()-sent)
	}
}
