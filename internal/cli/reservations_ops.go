package cli

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/keelwork/keel/modules/reservation"
	"github.com/keelwork/keel/server/api"
)

// SlotFilter selects slots for `keel reservations slots`; empty From and
// To leave the server's default window (the next 24 hours, and slots
// still running).
type SlotFilter struct {
	ResourceID string
	From, To   string
	Limit      int
}

func (f *SlotFilter) query() (url.Values, error) {
	q := url.Values{}
	if f.ResourceID != "" {
		if _, err := positiveID("resource", f.ResourceID); err != nil {
			return nil, err
		}
		q.Set("resource_id", f.ResourceID)
	}
	for name, v := range map[string]string{"from": f.From, "to": f.To} {
		if v == "" {
			continue
		}
		if _, err := time.Parse(time.RFC3339, v); err != nil {
			return nil, fmt.Errorf("--%s must be an RFC 3339 time such as 2030-01-07T10:00:00+08:00, got %q", name, v)
		}
		q.Set(name, v)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q, nil
}

// ReservationSlots prints slots with their availability.
func ReservationSlots(ctx context.Context, c *APIClient, o *AdminOpts, f *SlotFilter) error {
	q, err := f.query()
	if err != nil {
		return err
	}
	var page api.Page[*reservation.Slot]
	raw, err := c.Call(ctx, "GET", ReservationPrefix+"/slots?"+q.Encode(), nil, &page)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, s := range page.Data {
		rows = append(rows, []string{strconv.FormatInt(s.ID, 10), fmt.Sprintf("%d %s", s.ResourceID, s.ResourceName),
			ts(s.StartsAt), ts(s.EndsAt), strconv.Itoa(s.Capacity), strconv.Itoa(s.Held), strconv.Itoa(s.Available),
			strconv.Itoa(s.Waiting)})
	}
	table(o.Out, "SLOT\tRESOURCE\tSTARTS\tENDS\tCAPACITY\tHELD\tFREE\tWAITING", rows)
	return nil
}

// RunFilter selects release runs for `keel reservations runs`.
type RunFilter struct {
	Kind  string
	Limit int
	After string
}

// ReservationRuns prints the release runs with their figures, newest
// first.
func ReservationRuns(ctx context.Context, c *APIClient, o *AdminOpts, f *RunFilter) error {
	q := url.Values{}
	if f.Kind != "" {
		if _, ok := runKindWords[f.Kind]; !ok {
			return fmt.Errorf("unknown run kind %q (scan or compensation)", f.Kind)
		}
		q.Set("kind", f.Kind)
	}
	pageQuery(q, f.Limit, f.After)
	var page api.Page[*reservation.Run]
	raw, err := c.Call(ctx, "GET", ReservationPrefix+"/runs?"+q.Encode(), nil, &page)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, r := range page.Data {
		rows = append(rows, []string{strconv.FormatInt(r.ID, 10), wordOr(runKindWords, r.Kind), ts(r.StartedAt),
			r.Duration().Round(time.Millisecond).String(), strconv.Itoa(r.Scanned), strconv.Itoa(r.Released),
			strconv.Itoa(r.Failed), short(r.Errors, 50)})
	}
	table(o.Out, "RUN\tKIND\tSTARTED\tDURATION\tSCANNED\tRELEASED\tFAILED\tERRORS", rows)
	afterHint(o, page.NextCursor)
	return nil
}

// ReservationDeadLetters prints the reservations whose release failed
// past every retry, newest first.
func ReservationDeadLetters(ctx context.Context, c *APIClient, o *AdminOpts, limit int, after string) error {
	q := url.Values{}
	pageQuery(q, limit, after)
	var page api.Page[*reservation.Reservation]
	raw, err := c.Call(ctx, "GET", ReservationPrefix+"/dead-letters?"+q.Encode(), nil, &page)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, r := range page.Data {
		rows = append(rows, []string{strconv.FormatInt(r.ID, 10), r.UserID, fmt.Sprintf("%d/%d", r.ResourceID, r.SlotID),
			reservationStateWord(r.State), strconv.Itoa(r.RetryCount), optTS(r.DeadAt), short(r.LastError, 60)})
	}
	table(o.Out, "ID\tUSER\tRESOURCE/SLOT\tSTATE\tRETRIES\tDEAD SINCE\tLAST ERROR", rows)
	afterHint(o, page.NextCursor)
	return nil
}

// ReservationRequeue puts a dead letter back for the next release run
// (audited with reason).
func ReservationRequeue(ctx context.Context, c *APIClient, o *AdminOpts, id, reason string) error {
	if _, err := positiveID("reservation", id); err != nil {
		return err
	}
	if err := checkReservationReason(reason); err != nil {
		return err
	}
	var r reservation.Reservation
	raw, err := c.Call(ctx, "POST", ReservationPrefix+"/dead-letters/"+id+"/requeue", map[string]string{"reason": reason}, &r)
	if err != nil || printed(o, raw) {
		return notFound("reservation", id, err)
	}
	fmt.Fprintf(o.Out, "reservation %d requeued for the next release run (%s)\n", r.ID, reservationStateWord(r.State))
	return nil
}
