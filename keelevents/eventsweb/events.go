package eventsweb

import (
	"encoding/json"
	"errors"
	"github.com/keelwork/keel/module/web"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/module"
)

func (w *Web[TTx]) eventRoutes() []module.Route {
	if w.events == nil {
		return nil
	}
	v, o := module.RoleViewer, module.RoleOperator
	return []module.Route{
		{Pattern: "GET /api/v1/events/topics", Role: v, Handle: w.apiTopics},
		{Pattern: "GET /api/v1/events/consumers", Role: v, Handle: w.apiConsumers},
		{Pattern: "GET /api/v1/events/quarantine", Role: v, Handle: w.apiQuarantine},
		{Pattern: "GET /api/v1/events/manual", Role: v, Handle: w.apiManual},
		{Pattern: "GET /api/v1/events/manual/{id}", Role: v, Handle: w.apiManualGet},
		{Pattern: "POST /api/v1/events/manual/{id}/replay", Role: o, Handle: w.apiReplay},
		{Pattern: "GET /api/v1/events/event", Role: v, Handle: w.apiEvent},
	}
}

func (w *Web[TTx]) eventPages() []module.Page {
	if w.events == nil {
		return nil
	}
	v, o := module.RoleViewer, module.RoleOperator
	return []module.Page{
		{Pattern: "GET /events", Role: v, Handle: w.pageEvents},
		{Pattern: "GET /events/quarantine", Role: v, Handle: w.pageQuarantine},
		{Pattern: "GET /events/manual", Role: v, Handle: w.pageManual},
		{Pattern: "GET /events/manual/{id}", Role: v, Handle: w.pageManualOne},
		{Pattern: "POST /events/manual/{id}/replay", Role: o, Handle: w.pageReplay},
		{Pattern: "GET /events/event", Role: v, Handle: w.pageEvent},
	}
}

// eventParams reads an events list's parameters (consumer, state, after,
// limit), refusing others.
func eventParams(q url.Values, withState bool) (keelevents.ListParams, error) {
	var p keelevents.ListParams
	for k := range q {
		if k != "consumer" && k != "after" && k != "limit" && (k != "state" || !withState) {
			return p, module.Invalid("unknown query parameter %q", k)
		}
	}
	p.Consumer, p.State = q.Get("consumer"), q.Get("state")
	var err error
	if s := q.Get("after"); s != "" {
		if p.After, err = strconv.ParseInt(s, 10, 64); err != nil || p.After < 0 {
			return p, module.Invalid("after must be a non-negative id, got %q", s)
		}
	}
	if s := q.Get("limit"); s != "" {
		if p.Limit, err = strconv.Atoi(s); err != nil || p.Limit < 1 || p.Limit > 500 {
			return p, module.Invalid("limit must be 1..500, got %q", s)
		}
	}
	return p, nil
}

func (w *Web[TTx]) apiTopics(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	// The whole list, one row per topic or consumer: no parameters.
	if q := web.NewQuery(r); q.Err != nil {
		return 0, nil, q.Err
	}
	s, err := w.events.TopicStats(r.Context())
	if s == nil {
		s = []keelevents.TopicStats{}
	}
	return http.StatusOK, map[string]any{"data": s}, problem(err)
}

func (w *Web[TTx]) apiConsumers(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	// The whole list, one row per topic or consumer: no parameters.
	if q := web.NewQuery(r); q.Err != nil {
		return 0, nil, q.Err
	}
	s, err := w.events.ConsumerStats(r.Context())
	if s == nil {
		s = []keelevents.ConsumerStats{}
	}
	return http.StatusOK, map[string]any{"data": s}, problem(err)
}

func (w *Web[TTx]) apiQuarantine(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	p, err := eventParams(r.URL.Query(), false)
	if err != nil {
		return 0, nil, err
	}
	list, err := w.events.ListQuarantine(r.Context(), p)
	if list == nil {
		list = []keelevents.Quarantined{}
	}
	return http.StatusOK, map[string]any{"data": list}, problem(err)
}

func (w *Web[TTx]) apiManual(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	p, err := eventParams(r.URL.Query(), true)
	if err != nil {
		return 0, nil, err
	}
	list, err := w.events.ListManual(r.Context(), p)
	if list == nil {
		list = []keelevents.ManualEvent{}
	}
	return http.StatusOK, map[string]any{"data": list}, problem(err)
}

func (w *Web[TTx]) apiManualGet(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := apiPathID(r)
	if err != nil {
		return 0, nil, err
	}
	m, err := w.events.GetManual(r.Context(), id)
	return http.StatusOK, m, problem(err)
}

// replay checks the reason with the rules of every operator action before
// the backbone sees it, then replays.
func (w *Web[TTx]) replay(r *http.Request, id int64, reason string) error {
	reason, err := keelrecon.CheckReason(reason)
	if err != nil {
		return err
	}
	m, err := w.events.GetManual(r.Context(), id)
	if err != nil {
		return problem(err)
	}
	if m.State != "manual" {
		return module.Errorf(http.StatusConflict, "invalid_state", "manual event %d was replayed already", id)
	}
	err = w.events.Replay(r.Context(), id, reason)
	if errors.Is(err, keelevents.ErrReplayFailed) {
		// The handler failed again: the event stays manual, its error recorded.
		return &replayFailed{err}
	}
	return problem(err)
}

// replayFailed is a replay whose handler failed again.
type replayFailed struct{ err error }

func (e *replayFailed) Error() string { return e.err.Error() }
func (e *replayFailed) Unwrap() error { return e.err }

func (w *Web[TTx]) apiReplay(rw http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	var b reasonBody
	if err := module.Decode(rw, r, &b); err != nil {
		return 0, nil, err
	}
	if err := w.replay(r, id, b.Reason); err != nil {
		var rf *replayFailed
		if errors.As(err, &rf) {
			return 0, nil, module.Errorf(http.StatusConflict, CodeReplayFailed, "%s", rf.Error())
		}
		return 0, nil, err
	}
	m, err := w.events.GetManual(r.Context(), id)
	return http.StatusOK, m, problem(err)
}

func (w *Web[TTx]) apiEvent(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	q := r.URL.Query()
	for k := range q {
		if k != "topic" && k != "id" {
			return 0, nil, module.Invalid("unknown query parameter %q", k)
		}
	}
	d, err := w.events.GetEvent(r.Context(), q.Get("topic"), q.Get("id"))
	return http.StatusOK, d, problem(err)
}

// Payload lays a JSON payload out as fields.
func Payload(raw []byte) EvidenceTable {
	if len(raw) == 0 {
		return EvidenceTable{}
	}
	return Evidence(map[string]json.RawMessage{"payload": raw})
}

func (w *Web[TTx]) pageEvents(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	ctx := r.Context()
	topics, err := w.events.TopicStats(ctx)
	if err != nil {
		return nil, err
	}
	consumers, err := w.events.ConsumerStats(ctx)
	if err != nil {
		return nil, err
	}
	data := struct {
		base
		Topics    []keelevents.TopicStats
		Consumers []keelevents.ConsumerStats
		Now       time.Time
	}{w.base(r, v), topics, consumers, time.Now()}
	return w.render("events", v.Zh("事件总线", "Events"), "/events", data)
}

// AgeSince shows how long ago t was (for oldest unpublished / unacked).
func (b base) AgeSince(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return Age(time.Since(*t), b.V.Lang == "en")
}

// Payload is Payload for templates, in the words of the topic's module.
func (b base) Payload(topic string, raw []byte) EvidenceTable {
	return Payload(raw).In(b.V.Lang, Scope(topic), b.zone)
}

// Side lays two payloads of topic side by side (a quarantined event's).
func (b base) Side(topic string, applied, received []byte) EvidenceTable {
	return Evidence(map[string]json.RawMessage{"ours": applied, "received": received}).In(b.V.Lang, Scope(topic), b.zone)
}

func (w *Web[TTx]) pageQuarantine(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	q := r.URL.Query()
	p := keelevents.ListParams{Consumer: q.Get("consumer"), Limit: pageSize}
	if keelevents.ValidateConsumer(p.Consumer) != nil {
		p.Consumer = ""
	}
	p.After, _ = strconv.ParseInt(q.Get("after"), 10, 64)
	p.After = max(p.After, 0)
	list, err := w.events.ListQuarantine(r.Context(), p)
	if err != nil {
		return nil, err
	}
	next := ""
	if len(list) == pageSize {
		next = "/events/quarantine?" + url.Values{"consumer": {p.Consumer}, "after": {strconv.FormatInt(list[len(list)-1].ID, 10)}}.Encode()
	}
	data := struct {
		base
		List     []keelevents.Quarantined
		Consumer string
		Next     string
	}{w.base(r, v), list, p.Consumer, next}
	return w.render("quarantine", v.Zh("隔离事件", "Quarantined events"), "/events", data)
}

func (w *Web[TTx]) pageManual(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	q := r.URL.Query()
	p := keelevents.ListParams{Consumer: q.Get("consumer"), State: q.Get("state"), Limit: pageSize}
	if keelevents.ValidateConsumer(p.Consumer) != nil {
		p.Consumer = ""
	}
	if p.State != "replayed" && p.State != "" {
		p.State = "manual"
	}
	if _, set := q["state"]; !set {
		p.State = "manual"
	}
	p.After, _ = strconv.ParseInt(q.Get("after"), 10, 64)
	p.After = max(p.After, 0)
	list, err := w.events.ListManual(r.Context(), p)
	if err != nil {
		return nil, err
	}
	next := ""
	if len(list) == pageSize {
		next = "/events/manual?" + url.Values{"consumer": {p.Consumer}, "state": {p.State}, "after": {strconv.FormatInt(list[len(list)-1].ID, 10)}}.Encode()
	}
	data := struct {
		base
		List            []keelevents.ManualEvent
		Consumer, State string
		Next            string
	}{w.base(r, v), list, p.Consumer, p.State, next}
	return w.render("manual", v.Zh("人工处理事件", "Manual events"), "/events", data)
}

func (w *Web[TTx]) pageManualOne(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	m, err := w.events.GetManual(r.Context(), id)
	if err != nil {
		return nil, problem(err)
	}
	data := struct {
		base
		M *keelevents.ManualEvent
	}{w.base(r, v), m}
	return w.render("manualone", v.Zh("人工处理事件", "Manual event")+" #"+strconv.FormatInt(id, 10), "/events", data)
}

func (w *Web[TTx]) pageReplay(rw http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	r = withActor(r, v)
	return done(rw, r, v, "/events/manual/"+strconv.FormatInt(id, 10), w.replay(r, id, r.PostFormValue("reason")))
}

func (w *Web[TTx]) pageEvent(_ http.ResponseWriter, r *http.Request, v *module.View) (*module.Rendered, error) {
	q := r.URL.Query()
	topic, id := q.Get("topic"), q.Get("id")
	var d *keelevents.EventDetail
	var lookupErr string
	if topic != "" || id != "" {
		var err error
		if d, err = w.events.GetEvent(r.Context(), topic, id); err != nil {
			lookupErr = problemText(v, err)
		}
	}
	data := struct {
		base
		Topic, ID, LookupErr string
		D                    *keelevents.EventDetail
	}{w.base(r, v), topic, id, lookupErr, d}
	return w.render("event", v.Zh("事件详情", "Event"), "/events", data)
}
