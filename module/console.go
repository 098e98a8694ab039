package module

import "context"

// The console's view of a module beyond its pages: the group its pages sit
// in, a home of a few health numbers, and lookups by id. Each is an
// optional interface a module's Web value may implement; the console
// renders what the installed modules provide and nothing for the rest, so a
// module without them still works (its Nav items then form a group named
// after the module).

// Group names a module's place in the console's navigation: one entry in
// the top bar whose second level is the module's Nav items, in Order
// (lower first; the engine's group comes before every module's).
type Group struct {
	ZH, EN string
	Order  int
}

// Grouper is implemented by a module that names its navigation group.
type Grouper interface {
	Group() Group
}

// Level is how a health number reads at a glance.
type Level int

// Levels, from fine to needs attention now.
const (
	LevelOK Level = iota
	LevelWarn
	LevelBad
)

// Stat is one health number on a module's home and its overview card.
// Key is stable (the console keeps its samples under it to draw the
// trend); Value is in Unit (a unit word the operator reads: "条", "秒",
// "元"; UnitEN in English), and Link is the console path of the filtered
// list behind the number, relative to the console root ("/deliveries?state=
// waiting_ack"), or empty.
type Stat struct {
	Key            string
	ZH, EN         string
	Value          float64
	UnitZH, UnitEN string
	Level          Level
	Link           string
}

// Homer is implemented by a module with a home: its health in a few
// numbers, read when the home or the overview renders and sampled by the
// console for trends. It should be cheap (a few indexed counts).
type Homer interface {
	Home(ctx context.Context) ([]Stat, error)
}

// Hit is one result of a lookup by id: what was found, in the operator's
// words, and the console path that opens it.
type Hit struct {
	// Kind is a stable code of what it is ("payment", "refund"), for API
	// callers; optional (the console reads KindZH/KindEN).
	Kind string
	// KindZH and KindEN name what it is ("支付单", "payment").
	KindZH, KindEN string
	// Title is the id as found and a few words of state (in Chinese);
	// TitleEN is the same in English (empty: Title).
	Title, TitleEN string
	// Path opens it, relative to the console root.
	Path string
}

// Searcher is implemented by a module whose records can be found by an id
// an operator types (a payment number, a waybill, a device). Search gets
// the trimmed query and returns exact (or unambiguous prefix) matches, a
// handful at most; no match is an empty slice, not an error.
type Searcher interface {
	Search(ctx context.Context, q string) ([]Hit, error)
}
