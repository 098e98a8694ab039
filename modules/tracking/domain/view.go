package domain

import "time"

// View is what a customer is shown of a waybill: the last trusted status
// and how fresh it is, with 同步中 / 数据待补全 when that is true. It is
// only ever the aggregate's applied state: never a status nobody reported.
type View struct {
	// Milestone is the last trusted milestone ("" before any: 暂无状态).
	Milestone Milestone  `json:"milestone"`
	StatusZH  string     `json:"status_zh"`
	StatusEN  string     `json:"status_en"`
	Occurred  *time.Time `json:"occurred_at,omitempty"`
	// UpdatedAt is when the status last changed here; VerifiedAt when the
	// carrier's own query last confirmed the waybill.
	UpdatedAt  *time.Time `json:"updated_at,omitempty"`
	VerifiedAt *time.Time `json:"verified_at,omitempty"`
	// Syncing (同步中): backfills are pending or the carrier is degraded
	// (a share's breaker is not closed), so a newer status may exist.
	Syncing bool `json:"syncing"`
	// Incomplete (数据待补全): the process detail has gaps.
	Incomplete bool `json:"incomplete"`
}

// ViewOf builds the customer view from the aggregate and what is known
// about its gaps and its carrier.
func ViewOf(s State, updated, verified *time.Time, openGaps int, carrierDegraded bool) View {
	v := View{Milestone: s.Milestone, StatusZH: s.Milestone.Word("zh"), StatusEN: s.Milestone.Word("en"),
		UpdatedAt: updated, VerifiedAt: verified, Syncing: openGaps > 0 || carrierDegraded, Incomplete: openGaps > 0}
	if !s.OccurredAt.IsZero() {
		t := s.OccurredAt
		v.Occurred = &t
	}
	return v
}

// Flags is the view's flags in words.
func (v View) Flags(lang string) []string {
	var out []string
	if v.Syncing {
		out = append(out, map[bool]string{true: "Syncing", false: "同步中"}[lang == "en"])
	}
	if v.Incomplete {
		out = append(out, map[bool]string{true: "Detail incomplete", false: "数据待补全"}[lang == "en"])
	}
	return out
}
