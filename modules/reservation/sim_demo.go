package reservation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelwork/keel"
)

// demoEvery is how often the demo adds activity.
const demoEvery = 4 * time.Second

// demoCategories are the demo's categories: short grace so that releases,
// check-ins and waitlist promotions show in the console within a minute.
var demoCategories = []struct {
	id       string
	settings CategorySettings
	resource string
}{
	{"demo-desk", CategorySettings{NameZH: "共享工位（演示）", NameEN: "Hot desk (demo)", GraceMinutes: 1, ReminderMinutes: 1,
		AppealMinutes: 5, HoldMinutes: 2, ReleaseMode: ModeOn}, "A 区 01 号工位"},
	{"demo-parking", CategorySettings{NameZH: "车位（演示）", NameEN: "Parking (demo)", GraceMinutes: 1, ReminderMinutes: 1,
		AppealMinutes: 5, HoldMinutes: 2, ReleaseMode: ModeOn}, "B1 层 12 号车位"},
	{"demo-trial", CategorySettings{NameZH: "体验时段（演示）", NameEN: "Trial session (demo)", GraceMinutes: 1, ReminderMinutes: 0,
		AppealMinutes: 5, HoldMinutes: 2, ReleaseMode: ModeDryRun}, "VR 体验舱 1"},
}

// startDemo seeds the demo categories and resources (once) and starts the
// loop adding reservations that come due a minute later.
func (m *Module[TTx]) startDemo(ctx context.Context) error {
	ctx = keel.WithActor(context.WithoutCancel(ctx), "system:demo")
	resources, err := m.seedDemo(ctx)
	if err != nil {
		return fmt.Errorf("reservation demo: %w", err)
	}
	if _, err := m.kit.Life.Start(ctx); err != nil {
		return fmt.Errorf("reservation demo: %w", err)
	}
	m.kit.Life.Go(func(loop context.Context) {
		t := time.NewTicker(demoEvery)
		defer t.Stop()
		for i := 0; ; i++ {
			if err := m.demoStep(loop, resources, i); err != nil && loop.Err() == nil {
				m.log.Debug("reservation demo step", "error", err)
			}
			select {
			case <-loop.Done():
				return
			case <-t.C:
			}
		}
	})
	return nil
}

func (m *Module[TTx]) seedDemo(ctx context.Context) ([]*Resource, error) {
	existing, err := m.Resources(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]*Resource{}
	for _, r := range existing {
		byName[r.Name] = r
	}
	var out []*Resource
	for _, d := range demoCategories {
		if _, err := m.CreateCategory(ctx, d.id, d.settings, "演示数据"); err != nil && !errors.Is(err, errCategoryExists) {
			return nil, err
		}
		r := byName[d.resource]
		if r == nil {
			if r, err = m.CreateResource(ctx, d.id, d.resource, "演示"); err != nil {
				return nil, err
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// demoStep adds one round of activity: a new slot of two places booked and
// paid by two users with a third waiting (one of them will not come, so
// the waitlisted one is promoted), or a check-in of a paid reservation.
func (m *Module[TTx]) demoStep(ctx context.Context, resources []*Resource, i int) error {
	if i%3 == 1 {
		return m.demoCheckIn(ctx)
	}
	// Rounds 1, 4, 7... check in; the others cycle through the resources.
	slotRound := i - (i+2)/3
	res := resources[slotRound%len(resources)]
	start := m.now().Add(-30 * time.Second).Truncate(time.Second)
	slot, err := m.CreateSlot(ctx, res.ID, start, start.Add(20*time.Minute), 2)
	if err != nil {
		return err
	}
	for n := 0; n < 2; n++ {
		r, err := m.Book(ctx, slot.ID, fmt.Sprintf("demo-u%d", (i*2+n)%40))
		if err != nil {
			return err
		}
		if _, err := m.Pay(ctx, r.ID, r.Version); err != nil {
			return err
		}
	}
	_, err = m.JoinWaitlist(ctx, slot.ID, fmt.Sprintf("demo-w%d", i%40))
	return err
}

// demoCheckIn checks in the newest paid reservation: one of each pair
// arrives, the other becomes a no-show.
func (m *Module[TTx]) demoCheckIn(ctx context.Context) error {
	list, err := m.Reservations(ctx, ReservationFilter{State: StatePaid, Limit: 1})
	if err != nil || len(list) == 0 {
		return err
	}
	_, err = m.CheckIn(ctx, list[0].ID, list[0].Version, "演示：顾客已到店")
	return err
}
