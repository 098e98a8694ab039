package reservation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
)

// maxList bounds one page of any listing.
const maxList = 500

// CreateResource adds a resource of a category, audited.
func (m *Module[TTx]) CreateResource(ctx context.Context, category, name, location string) (*Resource, error) {
	if name == "" || utf8.RuneCountInString(name) > 200 {
		return nil, module.Invalid("name: 1..200 characters")
	}
	if _, err := m.Category(ctx, category); err != nil {
		return nil, module.Invalid("category_id: %v", err)
	}
	client, err := m.engine()
	if err != nil {
		return nil, err
	}
	var r *Resource
	err = m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if r, err = m.st.insertResource(ctx, tx, category, name, location, m.now()); err != nil {
			return err
		}
		return client.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "reservation.resource_create",
			Target: fmt.Sprintf("resource:%d", r.ID), Context: map[string]any{"category": category, "name": name}})
	})
	return r, wrapf(err, "creating resource %q", name)
}

// Resources lists resources.
func (m *Module[TTx]) Resources(ctx context.Context) ([]*Resource, error) {
	list, err := m.st.resources(ctx, maxList)
	return list, wrapf(err, "listing resources")
}

// CreateSlot adds a time slot with its capacity to a resource, audited.
func (m *Module[TTx]) CreateSlot(ctx context.Context, resource int64, start, end time.Time, capacity int) (*Slot, error) {
	switch {
	case start.IsZero() || !end.After(start):
		return nil, module.Invalid("ends_at must be after starts_at")
	case capacity < 1 || capacity > 100000:
		return nil, module.Invalid("capacity: 1..100000")
	}
	client, err := m.engine()
	if err != nil {
		return nil, err
	}
	var id int64
	err = m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		var err error
		id, err = m.st.insertSlot(ctx, tx, resource, start, end, capacity, m.now())
		if errors.Is(err, keelsql.ErrNoRows) {
			return module.Errorf(http.StatusConflict, "slot_exists", "resource %d already has a slot starting then", resource)
		}
		if err != nil {
			return err
		}
		return client.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "reservation.slot_create",
			Target: fmt.Sprintf("slot:%d", id), Context: map[string]any{"resource": resource, "capacity": capacity}})
	})
	if err != nil {
		return nil, wrapf(err, "creating a slot of resource %d", resource)
	}
	return m.slot(ctx, id)
}

func (m *Module[TTx]) slot(ctx context.Context, id int64) (*Slot, error) {
	s, err := m.st.slot(ctx, m.st.db, id)
	return s, wrapf(err, "reading slot %d", id)
}

// SlotAvailability returns a slot with its live availability. Reading it
// first releases the slot's due reservations (a light assist to the scan;
// its failure never fails the read).
func (m *Module[TTx]) SlotAvailability(ctx context.Context, id int64) (*Slot, error) {
	if err := m.assist(ctx, id); err != nil {
		m.met.assistErrors.Inc()
		m.log.Warn("reservation: assist release failed", "slot", id, "error", err)
	}
	return m.slot(ctx, id)
}

// SlotFilter selects slots overlapping [From, To).
type SlotFilter struct {
	ResourceID int64
	From, To   time.Time
	Limit      int
}

// Slots lists slots with their availability.
func (m *Module[TTx]) Slots(ctx context.Context, f SlotFilter) ([]*Slot, error) {
	if f.Limit <= 0 || f.Limit > maxList {
		f.Limit = maxList
	}
	list, err := m.st.slots(ctx, f)
	return list, wrapf(err, "listing slots")
}

// Waitlist lists a slot's waitlist.
func (m *Module[TTx]) Waitlist(ctx context.Context, slot int64) ([]WaitlistEntry, error) {
	list, err := m.st.waitlist(ctx, slot, maxList)
	return list, wrapf(err, "listing the waitlist of slot %d", slot)
}
