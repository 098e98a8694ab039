package console

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/server/api"
)

// statView is a home number as shown: its words, value and unit in the
// operator's language, its level, the list behind it and its trend.
type statView struct {
	Key   string
	Label string
	Value string
	Unit  string
	Level string // ok, warn, bad
	Link  string
	Chart template.HTML
}

// homeCard is a module's home: on its page and as a card of the overview.
type homeCard struct {
	Key, Name, Home string
	Stats           []statView
	// Unreadable: the module's numbers could not be read just now.
	Unreadable bool
}

var levelClass = map[module.Level]string{module.LevelOK: "ok", module.LevelWarn: "warn", module.LevelBad: "bad"}

// safeLink keeps a module's link inside the console.
func safeLink(l string) string {
	if !strings.HasPrefix(l, "/") || strings.HasPrefix(l, "//") || strings.HasPrefix(l, "/\\") {
		return ""
	}
	return l
}

// card reads a group's home numbers now (bounded by homeTimeout); charts
// adds each number's trend from the sampler.
func (c *Console) card(ctx context.Context, lang string, g *navGroup, charts bool) *homeCard {
	hc := &homeCard{Key: g.Key, Name: g.Name(lang), Home: g.Home}
	hctx, cancel := context.WithTimeout(ctx, homeTimeout)
	stats, err := g.homer.Home(hctx)
	cancel()
	if err != nil {
		c.cfg.Logger.Warn("console: module home numbers", "module", g.Key, "error", err)
		hc.Unreadable = true
		return hc
	}
	for _, st := range stats {
		sv := statView{Key: st.Key, Label: st.ZH, Value: num(st.Value), Unit: st.UnitZH, Level: levelClass[st.Level],
			Link: safeLink(st.Link)}
		if lang == langEN {
			sv.Label, sv.Unit = st.EN, st.UnitEN
		}
		if sv.Level == "" {
			sv.Level = "ok"
		}
		if charts {
			unit := word(lang, "unit_prefix") + sv.Unit
			sv.Chart = trendChart(lang, sv.Label, unit, c.sampler.trend(g.Key, st.Key), c.sampler.every)
		}
		hc.Stats = append(hc.Stats, sv)
	}
	return hc
}

// cards are every module's home, for the overview.
func (c *Console) cards(ctx context.Context, lang string) []*homeCard {
	var out []*homeCard
	for _, g := range c.groups {
		if g.homer != nil {
			out = append(out, c.card(ctx, lang, g, false))
		}
	}
	return out
}

type homeData struct {
	Card  *homeCard
	Group *navGroup
	Every time.Duration
}

// home is a module's home: its numbers with their trends, each linking to
// the list behind it, and its pages.
func (c *Console) home(w http.ResponseWriter, r *http.Request, v *view) error {
	name := r.PathValue("module")
	for _, g := range c.groups {
		if g.Key == name && g.homer != nil {
			v.GroupOn, v.NavOn = g.Key, g.Home
			return c.render(w, v, "home", &homeData{Card: c.card(r.Context(), v.Lang, g, true), Group: g, Every: c.sampler.every})
		}
	}
	return api.Errorf(api.CodeNotFound, "no system %q with a home", name)
}

// searchHit is a hit as shown.
type searchHit struct {
	Kind, Title, State, Path string
}

type searchData struct {
	Query       string
	Hits        []searchHit
	Unavailable []string
	Scope       string
}

// search finds an id in everything installed: one hit opens it, several
// are listed, none says so.
func (c *Console) search(w http.ResponseWriter, r *http.Request, v *view) error {
	res, err := api.Search(r.Context(), c.cfg.Engine, c.searchers, c.cfg.Logger, r.URL.Query().Get("q"))
	if err != nil {
		return err
	}
	d := &searchData{Query: res.Query}
	for _, h := range res.Hits {
		p := safeLink(h.Path)
		if p == "" {
			continue
		}
		sh := searchHit{Kind: h.KindZH, Title: h.Title, Path: p}
		if v.Lang == langEN {
			sh.Kind = h.KindEN
			if h.TitleEN != "" {
				sh.Title = h.TitleEN
			}
		}
		switch h.Kind {
		case "job":
			sh.State = stateWord(v.Lang, keeltype.JobState(h.State))
		case "batch":
			sh.State = batchStateWord(v.Lang, keeltype.BatchState(h.State))
		}
		d.Hits = append(d.Hits, sh)
	}
	if len(d.Hits) == 1 && len(res.Unavailable) == 0 {
		http.Redirect(w, r, d.Hits[0].Path, http.StatusSeeOther)
		return nil
	}
	for _, u := range res.Unavailable {
		d.Unavailable = append(d.Unavailable, c.groupName(v.Lang, u))
	}
	var names []string
	for _, s := range c.searchers {
		names = append(names, c.groupName(v.Lang, s.Module))
	}
	sep := "、"
	if v.Lang == langEN {
		sep = ", "
	}
	d.Scope = fmt.Sprintf(word(v.Lang, "search_scope"), strings.Join(names, sep))
	return c.render(w, v, "search", d)
}

// groupName is a module's group name in lang ("engine" is the engine's).
func (c *Console) groupName(lang, key string) string {
	for _, g := range c.groups {
		if g.Key == key {
			return g.Name(lang)
		}
	}
	return key
}
