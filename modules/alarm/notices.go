package alarm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
)

// NoticeArgs is the engine job that delivers one notice on its channel.
type NoticeArgs struct {
	ID int64 `json:"id"`
}

// Kind implements keel.JobArgs.
func (NoticeArgs) Kind() string { return "alarm.notice" }

// NoticeFacts are what a notice says of one instance: the facts a window
// keeps (first, peak, count, last, recovery) with the rule version.
type NoticeFacts struct {
	Instance     string     `json:"instance"`
	Device       string     `json:"device"`
	Rule         string     `json:"rule"`
	RuleVersion  int        `json:"rule_version"`
	State        string     `json:"state"`
	Severity     int        `json:"severity"`
	PeakSeverity int        `json:"peak_severity"`
	PeakValue    float64    `json:"peak_value"`
	Count        int64      `json:"count"`
	FirstAt      time.Time  `json:"first_at"`
	LastAt       time.Time  `json:"last_at"`
	RecoveredAt  *time.Time `json:"recovered_at,omitempty"`
}

// NoticeBody is what the channel receives.
type NoticeBody struct {
	Key     string        `json:"key"`
	Kind    string        `json:"kind"`
	Level   int           `json:"level"`
	Lane    string        `json:"lane"`
	Group   string        `json:"group,omitempty"`
	Members []NoticeFacts `json:"members"`
	// Historical marks a replayed summary: it tells what happened, not
	// that the fault is still there.
	Historical bool      `json:"historical,omitempty"`
	At         time.Time `json:"at"`
}

func factsOf(i *Instance) NoticeFacts {
	return NoticeFacts{Instance: i.ID, Device: i.Device, Rule: i.Rule, RuleVersion: i.RuleVersion, State: i.State, Severity: i.Severity,
		PeakSeverity: i.PeakSeverity, PeakValue: i.PeakValue, Count: i.Count, FirstAt: i.FirstAt, LastAt: i.LastAt, RecoveredAt: i.RecoveredAt}
}

// newNotice writes a notice (once per dedupe key) and, when it is to be
// sent now, its delivery job in the same transaction. A silence mutes it
// (the instance still moved). It reports whether the notice was new.
func (m *Module[TTx]) newNotice(ctx context.Context, tx keelsql.Tx[TTx], fx *effects, key, instance, group, kind string, level int, lane string,
	body NoticeBody, device, rule string, eventAt time.Time, hold bool, replayID int64) (bool, error) {
	return m.newNoticeOn(ctx, tx, fx, ChannelWebhook, key, instance, group, kind, level, lane, body, device, rule, eventAt, hold, replayID)
}

func (m *Module[TTx]) newNoticeOn(ctx context.Context, tx keelsql.Tx[TTx], fx *effects, channel, key, instance, group, kind string, level int,
	lane string, body NoticeBody, device, rule string, eventAt time.Time, hold bool, replayID int64) (bool, error) {
	now := m.Now()
	state, reason := "pending", ""
	if device != "" || rule != "" {
		var sid int64
		err := tx.QueryRow(ctx, m.q.Get("SilenceMatch"), device, rule, now).Scan(&sid)
		if err == nil {
			state, reason = "muted", fmt.Sprintf("silence:%d", sid)
		} else if !isNoRows(err) {
			return false, err
		}
	}
	if state == "pending" && hold {
		state = "held"
	}
	body.Key, body.Kind, body.Level, body.Lane, body.Group, body.At = key, kind, level, lane, group, now
	b, _ := json.Marshal(body)
	var id int64
	err := tx.QueryRow(ctx, m.q.Get("NoticeInsert"), key, instance, group, kind, level, lane, channel, state, reason,
		len(body.Members), string(b), now, eventAt, replayID).Scan(&id)
	if isNoRows(err) {
		fx.count(StageNotice, "deduplicated")
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("writing notice %s: %w", key, err)
	}
	fx.count(StageNotice, "created_"+lane)
	if state != "pending" {
		fx.count(StageNotice, state)
		return true, nil
	}
	return true, m.enqueueOn(ctx, tx, fx, id, lane, channel)
}

func (m *Module[TTx]) enqueue(ctx context.Context, tx keelsql.Tx[TTx], fx *effects, id int64, lane string) error {
	return m.enqueueOn(ctx, tx, fx, id, lane, ChannelWebhook)
}

func (m *Module[TTx]) enqueueOn(ctx context.Context, tx keelsql.Tx[TTx], fx *effects, id int64, lane, channel string) error {
	c, err := m.engineClient()
	if err != nil {
		return err
	}
	q, fk, prio := QueueOrdinary, FlowOrdinary, 2
	switch lane {
	case LaneSevere:
		q, fk, prio = QueueSevere, FlowSevere, 1
	case LaneReplay:
		fk, prio = FlowReplay, 3
	}
	if channel == ChannelSMS {
		fk = FlowSMS
	}
	if _, err := c.InsertTx(ctx, tx.Native(), NoticeArgs{ID: id}, &keel.InsertOpts{Queue: q, FlowKey: fk, Priority: prio,
		MaxAttempts: m.set.MaxAttempts, IdempotencyKey: fmt.Sprintf("alarm-notice-%d", id)}); err != nil {
		return fmt.Errorf("queueing notice %d: %w", id, err)
	}
	if fx.wake == nil {
		fx.wake = map[string]bool{}
	}
	fx.wake[q] = true
	return nil
}

// severeNotice is a severe instance's own notice on the severe lane: it
// never waits for a window and is never held or sampled.
func (m *Module[TTx]) severeNotice(ctx context.Context, tx keelsql.Tx[TTx], fx *effects, id, kind string, level int, s *Sample, r *Rule,
	at, received time.Time) error {
	inst, err := m.instanceTx(ctx, tx, id)
	if err != nil {
		return err
	}
	fx.count(StageSevere, "produced_"+kind)
	key := fmt.Sprintf("%s:%s:%d", id, kind, level)
	body := NoticeBody{Members: []NoticeFacts{factsOf(inst)}}
	if _, err = m.newNotice(ctx, tx, fx, key, id, "", kind, level, LaneSevere, body, s.Device, r.ID, received, false, 0); err != nil {
		return err
	}
	if ok, _ := m.SMSChannel(); ok {
		// The on-call phones too: a notice of its own (its own state,
		// attempts and ticket), deduplicated on its own key.
		_, err = m.newNoticeOn(ctx, tx, fx, ChannelSMS, key+":sms", id, "", kind, level, LaneSevere, body, s.Device, r.ID, received, false, 0)
	}
	return err
}

// touchGroup schedules the flush of an ordinary instance's group (its rule).
func (m *Module[TTx]) touchGroup(ctx context.Context, tx keelsql.Tx[TTx], group string, at time.Time) error {
	wait, interval := m.windows()
	_, err := tx.Exec(ctx, m.q.Get("GroupTouch"), group, m.Now().Add(wait), interval.Microseconds())
	return err
}

// windows are the group wait and interval in force: widened under
// backpressure (level 2 and up) so that ordinary notices are fewer.
func (m *Module[TTx]) windows() (time.Duration, time.Duration) {
	w, i := m.set.GroupWait, m.set.GroupInterval
	if m.pressure.level() >= 2 {
		w, i = w*4, i*4
	}
	return w, i
}

// FlushGroups sends every group whose flush is due: one notice per group
// flush listing its members with their facts. Under backpressure repeats
// (members unchanged since their last notice) are left out.
func (m *Module[TTx]) FlushGroups(ctx context.Context) (int, error) {
	now := m.Now()
	if err := m.scheduleRepeats(ctx, now); err != nil {
		return 0, err
	}
	rows, err := m.DB.Query(ctx, m.q.Get("GroupsDue"), now)
	if err != nil {
		return 0, err
	}
	type due struct {
		key     string
		at      time.Time
		flushes int64
	}
	var dues []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.key, &d.at, &d.flushes); err != nil {
			rows.Close()
			return 0, err
		}
		dues = append(dues, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	sent := 0
	for _, d := range dues {
		err := m.ordinaryConn(ctx, func() error {
			return m.retryTx(ctx, func(tx keelsql.Tx[TTx], fx *effects) error {
				c, err := tx.Exec(ctx, m.q.Get("GroupClaim"), d.key, d.at, now, d.flushes)
				if err != nil || c == 0 {
					return err // another instance flushed it
				}
				return m.flushGroup(ctx, tx, fx, d.key, d.flushes+1, now)
			})
		})
		if err != nil {
			return sent, err
		}
		sent++
	}
	return sent, nil
}

func (m *Module[TTx]) scheduleRepeats(ctx context.Context, now time.Time) error {
	if m.pressure.level() >= 2 {
		return nil // limit repeats under backpressure
	}
	rows, err := m.DB.Query(ctx, m.q.Get("GroupsRepeatDue"), now.Add(-m.set.RepeatInterval))
	if err != nil {
		return err
	}
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return err
		}
		keys = append(keys, k)
	}
	rows.Close()
	for _, k := range keys {
		if _, err := m.DB.Exec(ctx, m.q.Get("GroupSchedule"), k, now); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (m *Module[TTx]) flushGroup(ctx context.Context, tx keelsql.Tx[TTx], fx *effects, key string, flush int64, now time.Time) error {
	repeatBefore := now.Add(-m.set.RepeatInterval)
	if m.pressure.level() >= 2 {
		repeatBefore = time.Time{} // no repeats
	}
	list, err := m.instancesTx(ctx, tx, m.q.Get("InstanceDirty"), key, repeatBefore)
	if err != nil {
		return err
	}
	var members []NoticeFacts
	var firstEvent time.Time
	for _, i := range list {
		// Inhibition: an ordinary alarm of a device that has a severe one
		// open is not sent (it still changes state).
		if i.State != StRecovered && m.severeOpen.hasDevice(i.Device) {
			fx.count(StageNotice, "inhibited")
			if _, err := tx.Exec(ctx, m.q.Get("InstanceFlushed"), i.ID, i.Ver, now); err != nil {
				return err
			}
			continue
		}
		var sid int64
		err := tx.QueryRow(ctx, m.q.Get("SilenceMatch"), i.Device, i.Rule, now).Scan(&sid)
		if err == nil {
			fx.count(StageNotice, "silenced_member")
			if _, err := tx.Exec(ctx, m.q.Get("InstanceFlushed"), i.ID, i.Ver, now); err != nil {
				return err
			}
			continue
		} else if !isNoRows(err) {
			return err
		}
		members = append(members, factsOf(i))
		if firstEvent.IsZero() || i.ReceivedAt.Before(firstEvent) {
			firstEvent = i.ReceivedAt
		}
		if _, err := tx.Exec(ctx, m.q.Get("InstanceFlushed"), i.ID, i.Ver, now); err != nil {
			return err
		}
	}
	if len(members) == 0 {
		return nil
	}
	fx.count(StageNotice, "aggregated_members")
	if fx.counts != nil {
		fx.counts[[2]string{StageNotice, "aggregated_members"}] += int64(len(members)) - 1
	}
	hold := m.storm.active() // held through a storm, merged and replayed after it
	_, err = m.newNotice(ctx, tx, fx, fmt.Sprintf("group:%s:%d", key, flush), "", key, "group", SevMinor, LaneOrdinary,
		NoticeBody{Members: members}, "", "", firstEvent, hold, 0)
	return err
}

// webhook delivers a notice: success is the receiver's 2xx.
func (m *Module[TTx]) deliver(ctx context.Context, job *keel.Job[NoticeArgs]) error {
	n, err := m.Notice(ctx, job.Args.ID)
	if err != nil {
		return err
	}
	if n.State != "pending" {
		return nil // sent, muted, merged or escalated already
	}
	var sendErr error
	final := false
	if n.Channel == ChannelSMS {
		sendErr = m.sendSMS(ctx, n)
		final = errors.Is(sendErr, keeltype.ErrInvalidArgument) // never sendable: a ticket now
	} else {
		url := m.webhookURL()
		if url == "" {
			return keel.JobSnooze(30 * time.Second) // no channel configured yet: waiting, not failing
		}
		sendErr = m.post(ctx, url, n)
	}
	now := m.Now()
	if sendErr == nil {
		if _, err := m.DB.Exec(ctx, m.q.Get("NoticeSent"), n.ID, now); err != nil {
			return err
		}
		m.counters.Add(StageNotice, "sent_"+n.Lane, 1)
		if n.Lane == LaneSevere {
			m.counters.Add(StageSevere, "delivered", 1)
			m.latency.observe(now.Sub(n.EventAt))
		}
		return nil
	}
	m.counters.Add(StageNotice, "failed_attempt", 1)
	if _, err := m.DB.Exec(ctx, m.q.Get("NoticeAttempt"), n.ID, trunc(sendErr.Error(), 300)); err != nil {
		return err
	}
	if final || job.Attempt >= job.MaxAttempts {
		// The channel failed for good: an on-call ticket takes it over.
		err := m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
			if _, err := tx.Exec(ctx, m.q.Get("NoticeEscalated"), n.ID, trunc(sendErr.Error(), 300)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, m.q.Get("TicketInsert"), n.ID, n.InstanceID, "通知渠道失败："+trunc(sendErr.Error(), 200), now)
			return err
		})
		if err != nil {
			return err
		}
		m.counters.Add(StageNotice, "escalated_ticket", 1)
		return keel.JobPermanent(sendErr)
	}
	return sendErr
}

func (m *Module[TTx]) post(ctx context.Context, url string, n *Notice) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(n.Body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", n.Key)
	resp, err := m.http.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered %d", resp.StatusCode)
	}
	return nil
}

// SetWebhookURL points notices at url (tests; otherwise alarm.webhook_url).
func (m *Module[TTx]) SetWebhookURL(url string) { m.hookURL.Store(&url) }

func (m *Module[TTx]) webhookURL() string {
	if p := m.hookURL.Load(); p != nil {
		return *p
	}
	return m.set.WebhookURL
}
