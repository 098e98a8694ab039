// Package domain is the tracking module's business rules as pure functions:
// carriers, unified milestones and their partial order, normalization of
// carrier codes under a mapping version, idempotency keys and fingerprints,
// and how a waybill's aggregate advances. Nothing here touches a database
// or the network, so every rule is tested exhaustively.
package domain

import "fmt"

// Milestone is a unified tracking milestone: what every carrier's own
// event codes are mapped to.
type Milestone string

// The milestones. The main chain runs 揽收 → 出境 → 到港 → 清关 → 派送 →
// 签收; 异常 may happen anywhere, 退回 ends a parcel's journey like 签收,
// and 签收撤销 is an explicit new fact after 签收, never an edit of it.
const (
	PickedUp        Milestone = "picked_up"        // 揽收
	Departed        Milestone = "departed"         // 出境
	Arrived         Milestone = "arrived"          // 到港
	Customs         Milestone = "customs"          // 清关
	OutForDelivery  Milestone = "out_for_delivery" // 派送
	Delivered       Milestone = "delivered"        // 签收
	Exception       Milestone = "exception"        // 异常
	Returned        Milestone = "returned"         // 退回
	DeliveryRevoked Milestone = "delivery_revoked" // 签收撤销
)

// Milestones lists every milestone in display order.
var Milestones = []Milestone{PickedUp, Departed, Arrived, Customs, OutForDelivery, Delivered, Exception, Returned, DeliveryRevoked}

var milestoneWords = map[Milestone][2]string{
	PickedUp:        {"揽收", "Picked up"},
	Departed:        {"出境", "Departed origin"},
	Arrived:         {"到港", "Arrived at destination"},
	Customs:         {"清关", "Customs"},
	OutForDelivery:  {"派送", "Out for delivery"},
	Delivered:       {"签收", "Delivered"},
	Exception:       {"异常", "Exception"},
	Returned:        {"退回", "Returned"},
	DeliveryRevoked: {"签收撤销", "Delivery revoked"},
}

// Valid reports whether m is a known milestone.
func (m Milestone) Valid() bool { _, ok := milestoneWords[m]; return ok }

// Word is the milestone in the operator's language ("zh" or "en").
func (m Milestone) Word(lang string) string {
	w, ok := milestoneWords[m]
	if !ok {
		if m == "" {
			if lang == "en" {
				return "No status yet"
			}
			return "暂无状态"
		}
		return string(m)
	}
	if lang == "en" {
		return w[1]
	}
	return w[0]
}

// ParseMilestone reads a milestone by its stable name.
func ParseMilestone(s string) (Milestone, error) {
	m := Milestone(s)
	if !m.Valid() {
		return "", fmt.Errorf("unknown milestone %q", s)
	}
	return m, nil
}

// level places a milestone in the partial order used when a carrier gives
// no source sequence. Chain milestones rise; 异常 shares 派送's level (the
// trusted occurred time decides between them); 签收 and 退回 end the
// chain, so no late in-transit event can move a delivered parcel back;
// 签收撤销 is above 签收 because it can only be a newer fact.
func (m Milestone) level() int {
	switch m {
	case PickedUp:
		return 10
	case Departed:
		return 20
	case Arrived:
		return 30
	case Customs:
		return 40
	case OutForDelivery, Exception:
		return 50
	case Delivered, Returned:
		return 60
	case DeliveryRevoked:
		return 70
	}
	return 0
}

// Terminal reports whether the milestone ends the journey.
func (m Milestone) Terminal() bool { return m == Delivered || m == Returned }

// Before reports whether the partial order places a strictly before b
// (comparable milestones only; 异常 is comparable to neither 派送 nor
// itself by milestone alone).
func Before(a, b Milestone) bool { return a.level() < b.level() && a.level() > 0 }
