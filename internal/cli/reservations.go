package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/keelwork/keel/modules/reservation"
	"github.com/keelwork/keel/server/api"
)

// ReservationPrefix is where the reservation module's API lives.
const ReservationPrefix = "/api/v1/reservation"

// MinReservationReason mirrors the module's rule for audited control
// actions (restore, requeue): a reason of at least 5 characters.
const MinReservationReason = 5

// WithRemoteAPI is WithAPI for verbs of a business module: the CLI's local
// mode serves only the engine's API, not module routes, so these verbs
// need a running server. group names the verb group in the message.
func WithRemoteAPI(ctx context.Context, o *AdminOpts, group string, f func(ctx context.Context, c *APIClient) error) error {
	if o.Server == "" {
		return fmt.Errorf("keel %s acts through a running server: pass --server URL (or KEEL_SERVER) and KEEL_TOKEN", group)
	}
	return WithAPI(ctx, o, f)
}

// ReservationFilter selects reservations for `keel reservations list`.
type ReservationFilter struct {
	State  string
	SlotID string
	User   string
	Limit  int
	After  string
}

func (f *ReservationFilter) query() (url.Values, error) {
	q := url.Values{}
	if f.State != "" {
		if !reservation.State(f.State).Valid() {
			return nil, fmt.Errorf("unknown reservation state %q (one of %s)", f.State, reservationStateNames())
		}
		q.Set("state", f.State)
	}
	if f.SlotID != "" {
		if _, err := positiveID("slot", f.SlotID); err != nil {
			return nil, err
		}
		q.Set("slot_id", f.SlotID)
	}
	if f.User != "" {
		q.Set("user_id", f.User)
	}
	pageQuery(q, f.Limit, f.After)
	return q, nil
}

// positiveID checks an id before anything is sent, so that a typo gets a
// plain answer rather than an API problem.
func positiveID(what, id string) (string, error) {
	if n, err := strconv.ParseInt(id, 10, 64); err != nil || n < 1 {
		return "", fmt.Errorf("%s ID must be a positive integer, got %q", what, id)
	}
	return id, nil
}

func reservationPath(id string) (string, error) {
	if _, err := positiveID("reservation", id); err != nil {
		return "", err
	}
	return ReservationPrefix + "/reservations/" + id, nil
}

// notFound names the object when the API does not know it.
func notFound(what, id string, err error) error {
	var p *ProblemError
	if errors.As(err, &p) && p.Code == api.CodeNotFound {
		return fmt.Errorf("no %s %s: %w", what, id, err)
	}
	return err
}

func checkReservationReason(reason string) error {
	if utf8.RuneCountInString(strings.TrimSpace(reason)) < MinReservationReason {
		return fmt.Errorf("--reason is required: at least %d characters saying why (it goes to the audit log)",
			MinReservationReason)
	}
	return nil
}

// optTS prints an optional time, or "-".
func optTS(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return ts(*t)
}

// ReservationsList prints one page of reservations, newest first.
func ReservationsList(ctx context.Context, c *APIClient, o *AdminOpts, f *ReservationFilter) error {
	q, err := f.query()
	if err != nil {
		return err
	}
	var page api.Page[*reservation.Reservation]
	raw, err := c.Call(ctx, "GET", ReservationPrefix+"/reservations?"+q.Encode(), nil, &page)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, r := range page.Data {
		rows = append(rows, []string{strconv.FormatInt(r.ID, 10), r.UserID,
			fmt.Sprintf("%d/%d", r.ResourceID, r.SlotID), reservationStateWord(r.State), ts(r.StartsAt),
			optTS(r.ExpectedReleaseAt)})
	}
	table(o.Out, "ID\tUSER\tRESOURCE/SLOT\tSTATE\tSTARTS\tEXPECTED RELEASE", rows)
	afterHint(o, page.NextCursor)
	return nil
}

// ReservationGet prints a reservation with its history and notifications.
func ReservationGet(ctx context.Context, c *APIClient, o *AdminOpts, id string) error {
	path, err := reservationPath(id)
	if err != nil {
		return err
	}
	var d reservation.ReservationDetail
	raw, err := c.Call(ctx, "GET", path, nil, &d)
	if err != nil || printed(o, raw) {
		return notFound("reservation", id, err)
	}
	if d.Reservation == nil {
		return fmt.Errorf("reservation %s: the server sent no reservation", id)
	}
	printReservation(o, &d)
	return nil
}

func printReservation(o *AdminOpts, d *reservation.ReservationDetail) {
	r := d.Reservation
	fmt.Fprintf(o.Out, "reservation %d  user %s  %s\n", r.ID, r.UserID, reservationStateWord(r.State))
	rows := [][]string{
		{"slot", fmt.Sprintf("%d (resource %d, category %s)", r.SlotID, r.ResourceID, r.CategoryID)},
		{"time", ts(r.StartsAt) + " – " + ts(r.EndsAt)},
		{"grace", fmt.Sprintf("%d min", r.GraceMinutes)},
		{"expected release", optTS(r.ExpectedReleaseAt)},
		{"version", strconv.FormatInt(r.Version, 10)},
	}
	if r.HoldExpiresAt != nil {
		rows = append(rows, []string{"hold expires", ts(*r.HoldExpiresAt)})
	}
	if r.AppealUntil != nil {
		rows = append(rows, []string{"appeal until", ts(*r.AppealUntil)})
	}
	if r.RetryCount > 0 || r.LastError != "" {
		rows = append(rows, []string{"release retries", fmt.Sprintf("%d, last error %s", r.RetryCount, r.LastError)})
	}
	if r.DeadAt != nil {
		rows = append(rows, []string{"dead letter since", ts(*r.DeadAt)})
	}
	fields(o.Out, rows)
	var hist [][]string
	for _, h := range d.History {
		hist = append(hist, []string{ts(h.At), reservationStateWord(h.FromState) + " → " + reservationStateWord(h.ToState),
			h.Actor, short(h.Reason, 60)})
	}
	fmt.Fprintln(o.Out)
	table(o.Out, "AT\tFROM → TO\tACTOR\tREASON", hist)
	if len(d.Notifications) == 0 {
		return
	}
	var notes [][]string
	for _, n := range d.Notifications {
		notes = append(notes, []string{wordOr(notificationKindWords, n.Kind), wordOr(deliveryStateWords, n.State),
			ts(n.DeliverAt), strconv.Itoa(n.Attempts), short(n.LastError, 50)})
	}
	fmt.Fprintln(o.Out)
	table(o.Out, "NOTIFICATION\tDELIVERY\tDUE\tATTEMPTS\tLAST ERROR", notes)
}

// reservationActions maps the CLI's verbs to the API's paths and past
// tenses.
var reservationActions = map[string]struct{ path, done string }{
	"checkin": {"check-in", "checked in"},
	"cancel":  {"cancel", "cancelled"},
	"restore": {"restore", "restored"},
}

// ReservationAction checks in, cancels or restores (appeal) a reservation.
// Restore needs a reason; the others take one optionally. version 0 acts on
// whatever version the reservation has now.
func ReservationAction(ctx context.Context, c *APIClient, o *AdminOpts, action, id, reason string, version int64) error {
	act, ok := reservationActions[action]
	if !ok {
		return fmt.Errorf("unknown reservation action %q (checkin, cancel or restore)", action)
	}
	path, err := reservationPath(id)
	if err != nil {
		return err
	}
	if action == "restore" {
		if err := checkReservationReason(reason); err != nil {
			return err
		}
	}
	body := map[string]any{"reason": reason, "version": version}
	var r reservation.Reservation
	raw, err := c.Call(ctx, "POST", path+"/"+act.path, body, &r)
	if err != nil || printed(o, raw) {
		return notFound("reservation", id, err)
	}
	fmt.Fprintf(o.Out, "reservation %d %s (now %s, version %d)\n", r.ID, act.done, reservationStateWord(r.State), r.Version)
	return nil
}
