package inventory

import (
	"github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/modules/inventory/domain"
)

// fieldWords name the fields the module writes in reconciliation evidence
// and in its stock events, so the console says 在库 where the JSON says
// on_hand. TestEvidenceFieldsHaveWords walks the source and the event.
var fieldWords = map[string][2]string{
	"balance":        {"余额", "Balance"},
	"derived":        {"按流水推算", "From the ledger"},
	"version":        {"版本", "Version"},
	"max_version":    {"流水最大版本", "Latest ledger version"},
	"rows":           {"流水行数", "Ledger rows"},
	"id":             {"编号", "ID"},
	"order_line":     {"订单行", "Order line"},
	"state":          {"状态", "State"},
	"qty":            {"数量", "Quantity"},
	"reserve":        {"预占流水", "Reserve rows"},
	"confirm":        {"确认流水", "Confirm rows"},
	"release":        {"释放流水", "Release rows"},
	"return":         {"退货流水", "Return rows"},
	"reservation":    {"预占单", "Reservation"},
	"reservation_id": {"预占单", "Reservation"},
	"receipt":        {"出库单", "Shipment receipt"},
	"warehouse":      {"仓库", "Warehouse"},
	"sku":            {"SKU", "SKU"},
	"lag":            {"落后版本数", "Versions behind"},
	"on_hand":        {"在库", "On hand"},
	"count":          {"盘点单", "Count"},
	"counted":        {"盘点数量", "Counted"},
	"diff":           {"差额", "Difference"},
	"ledger_id":      {"流水号", "Ledger entry"},
	"movement":       {"变动", "Movement"},
	"stock_version":  {"库存版本", "Stock version"},
	"available":      {"可用", "Available"},
	"reserved":       {"已预占", "Reserved"},
	// The evidence's sources beside ours and the ledger.
	"stock":      {"库存", "Stock"},
	"projection": {"投影", "Projection"},
	"books":      {"账面", "Books"},
	// domain.Balance is written with Go's field names.
	"OnHand":    {"在库", "On hand"},
	"Available": {"可用", "Available"},
	"Reserved":  {"已预占", "Reserved"},
	"Sold":      {"已售", "Sold"},
	"Returned":  {"已退回", "Returned"},
}

func init() {
	web.RegisterFields(Name, fieldWords)
	web.RegisterFieldValues(Name, "state", domain.Words)
	web.RegisterFieldValues(Name, "movement", domain.Words)
}
