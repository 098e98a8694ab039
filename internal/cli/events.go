package cli

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/eventsweb"
)

// EventsPrefix is where the events API lives.
const EventsPrefix = "/api/v1/events"

func age(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return eventsweb.Age(time.Since(*t), true)
}

// EventsTopics prints the outbox per topic.
func EventsTopics(ctx context.Context, c *APIClient, o *AdminOpts) error {
	var l apiList[keelevents.TopicStats]
	raw, err := c.Call(ctx, "GET", EventsPrefix+"/topics", nil, &l)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, s := range l.Data {
		rows = append(rows, []string{s.Topic, strconv.FormatInt(s.Backlog, 10), age(s.OldestUnpublished),
			strconv.FormatInt(s.Published, 10), strconv.FormatInt(s.Archived, 10), strconv.FormatInt(s.Attempts, 10),
			strconv.FormatInt(s.Unknown, 10)})
	}
	table(o.Out, "TOPIC\tBACKLOG\tOLDEST UNPUBLISHED\tPUBLISHED\tARCHIVED\tATTEMPTS\tUNKNOWN", rows)
	return nil
}

// EventsConsumers prints the consumers with their lag.
func EventsConsumers(ctx context.Context, c *APIClient, o *AdminOpts) error {
	var l apiList[keelevents.ConsumerStats]
	raw, err := c.Call(ctx, "GET", EventsPrefix+"/consumers", nil, &l)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, s := range l.Data {
		rows = append(rows, []string{s.Name, strings.Join(s.Topics, ","), strconv.FormatInt(s.Lag, 10), age(s.OldestUnacked),
			strconv.FormatInt(s.Applied, 10), strconv.FormatInt(s.Duplicates, 10), strconv.FormatInt(s.Quarantined, 10),
			strconv.FormatInt(s.Manual, 10)})
	}
	table(o.Out, "CONSUMER\tTOPICS\tLAG\tOLDEST UNACKED\tAPPLIED\tDUPLICATES\tQUARANTINED\tMANUAL", rows)
	return nil
}

func eventListQuery(consumer, state string, limit int, after int64) (url.Values, error) {
	q := url.Values{}
	if consumer != "" {
		if err := keelevents.ValidateConsumer(consumer); err != nil {
			return nil, fmt.Errorf("--consumer %q is not a consumer name ([a-z0-9_-]{1,64})", consumer)
		}
		q.Set("consumer", consumer)
	}
	if state != "" {
		if state != "manual" && state != "replayed" {
			return nil, fmt.Errorf("--state must be manual or replayed, got %q", state)
		}
		q.Set("state", state)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	return q, nil
}

// EventsQuarantine lists quarantined events with both digests.
func EventsQuarantine(ctx context.Context, c *APIClient, o *AdminOpts, consumer string, limit int, after int64) error {
	q, err := eventListQuery(consumer, "", limit, after)
	if err != nil {
		return err
	}
	var l apiList[keelevents.Quarantined]
	raw, err := c.Call(ctx, "GET", EventsPrefix+"/quarantine?"+q.Encode(), nil, &l)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, x := range l.Data {
		rows = append(rows, []string{strconv.FormatInt(x.ID, 10), x.Consumer, x.Topic, x.EventID, short(string(x.AppliedPayload), 40),
			short(string(x.Payload), 40), strconv.Itoa(x.Seen), ts(x.At)})
	}
	table(o.Out, "ID\tCONSUMER\tTOPIC\tEVENT\tAPPLIED PAYLOAD\tRECEIVED PAYLOAD\tSEEN\tAT", rows)
	return nil
}

// EventsManual lists manual events.
func EventsManual(ctx context.Context, c *APIClient, o *AdminOpts, consumer, state string, limit int, after int64) error {
	q, err := eventListQuery(consumer, state, limit, after)
	if err != nil {
		return err
	}
	var l apiList[keelevents.ManualEvent]
	raw, err := c.Call(ctx, "GET", EventsPrefix+"/manual?"+q.Encode(), nil, &l)
	if err != nil || printed(o, raw) {
		return err
	}
	var rows [][]string
	for _, m := range l.Data {
		rows = append(rows, []string{strconv.FormatInt(m.ID, 10), m.Consumer, m.Message.Topic, m.Message.ID, m.Message.Key,
			strconv.Itoa(m.Attempts), m.State, short(m.LastError, 50), ts(m.At)})
	}
	table(o.Out, "ID\tCONSUMER\tTOPIC\tEVENT\tKEY\tATTEMPTS\tSTATE\tLAST ERROR\tAT", rows)
	return nil
}

// EventsGet prints one event: its outbox row (or archive summary) and each
// consumer's inbox row.
func EventsGet(ctx context.Context, c *APIClient, o *AdminOpts, topic, id string) error {
	if err := keelevents.ValidateTopic(topic); err != nil {
		return fmt.Errorf("topic %q is not a topic (dot-separated [a-z0-9_-] tokens)", topic)
	}
	if err := keelevents.ValidateID(id); err != nil {
		return fmt.Errorf("event id %q is not an event id ([A-Za-z0-9_.:/-]{1,200})", id)
	}
	var d keelevents.EventDetail
	raw, err := c.Call(ctx, "GET", EventsPrefix+"/event?"+url.Values{"topic": {topic}, "id": {id}}.Encode(), nil, &d)
	if err != nil || printed(o, raw) {
		return notFound("event", topic+"/"+id, err)
	}
	fmt.Fprintf(o.Out, "event %s/%s  key %s\n", d.Topic, d.ID, d.Key)
	rows := [][]string{{"type", d.Type}, {"partition", strconv.Itoa(d.Partition)}, {"digest", d.Digest}, {"emitted", ts(d.EmittedAt)},
		{"published", optTS(d.PublishedAt)}, {"attempts", fmt.Sprintf("%d (unknown outcomes %d)", d.Attempts, d.Unknown)}}
	if d.Archived {
		rows = append(rows, []string{"archived", optTS(d.ArchivedAt) + " (summary only)"})
	} else {
		rows = append(rows, []string{"payload", short(string(d.Payload), 200)})
	}
	fields(o.Out, rows)
	var inbox [][]string
	for _, i := range d.Inbox {
		inbox = append(inbox, []string{i.Consumer, i.State, strconv.Itoa(i.Attempts), ts(i.At)})
	}
	fmt.Fprintln(o.Out)
	table(o.Out, "CONSUMER\tSTATE\tATTEMPTS\tAT", inbox)
	return nil
}

// EventsReplay replays a manual event with its original id.
func EventsReplay(ctx context.Context, c *APIClient, o *AdminOpts, id, reason string) error {
	path, err := idPath("manual event", EventsPrefix+"/manual", id)
	if err != nil {
		return err
	}
	if reason, err = checkActionReason(reason); err != nil {
		return err
	}
	var m keelevents.ManualEvent
	raw, err := c.Call(ctx, "POST", path+"/replay", map[string]string{"reason": reason}, &m)
	if err != nil || printed(o, raw) {
		return notFound("manual event", id, localRefusal(o, "replaying manual event "+id, err))
	}
	fmt.Fprintf(o.Out, "manual event %d replayed (%s/%s for %s)\n", m.ID, m.Message.Topic, m.Message.ID, m.Consumer)
	return nil
}
