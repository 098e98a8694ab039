package inventory

import "github.com/keelwork/keel/module/web"

// The words of the audit actions this module writes (the console's audit
// log shows them; a test checks every action the source writes has words).
func init() {
	web.RegisterTopics(map[string][2]string{Topic: {"库存变动", "Stock changed"}})
	web.RegisterConsumers(map[string][2]string{
		ConsumerFulfilment: {"履约", "Fulfilment"},
		ConsumerSearch:     {"搜索投影", "Search projection"},
		ConsumerStats:      {"库存统计", "Stock statistics"},
	})
	web.RegisterReconcilers(map[string][2]string{
		ReconBalance:    {"库存余额与流水核对", "Balances against the ledger"},
		ReconEndState:   {"订单行预占终态核对", "Reservations' end states"},
		ReconShipments:  {"出库与仓库回执核对", "Shipments against the warehouse's receipts"},
		ReconProjection: {"搜索投影滞后核对", "Search projection lag"},
		ReconCount:      {"盘点与账面核对", "Physical counts against the books"},
	})
	web.RegisterActions(map[string][2]string{
		"inventory.admission": {"手动切换库存繁忙保护", "Switch inventory's busy protection by hand"},
	})
	// The texts the module writes into a reservation's history and the
	// ledger's reasons; the console says them in the operator's language
	// (rows already written read the same way: the words match the text).
	web.RegisterReasons(Name,
		web.SystemReason{Text: `order line (?P<line>.+)`, ZH: "订单行 {line}", EN: "order line {line}"},
		web.SystemReason{Text: `receipt (?P<receipt>.+?), warehouse saw stock version (?P<version>\d+)`,
			ZH: "仓库回执 {receipt}，仓库看到的库存版本 {version}", EN: "warehouse receipt {receipt}, at stock version {version} as the warehouse saw it"},
		web.SystemReason{Text: `receipt (?P<receipt>.+)`, ZH: "单据 {receipt}", EN: "receipt {receipt}"},
		web.SystemReason{Text: `stock version (?P<version>\d+)`, ZH: "库存版本 {version}", EN: "stock version {version}"},
		web.SystemReason{Text: `available (?P<available>-?\d+) < (?P<qty>\d+) at stock version (?P<version>\d+)`,
			ZH: "可用 {available} 少于所需 {qty}（库存版本 {version}）", EN: "only {available} available of {qty} needed (stock version {version})"},
		web.SystemReason{Text: `timeout check: order "(?P<order>.*)", warehouse "(?P<warehouse>.*)"`,
			ZH: "超时核查：订单 {order}，仓库 {warehouse}", EN: "timeout check: order {order}, warehouse {warehouse}"},
		web.SystemReason{Text: `cancel: (?P<reason>.*)`, ZH: "取消：{reason}", EN: "cancelled: {reason}"},
		web.SystemReason{Text: `return: (?P<reason>.*)`, ZH: "退货：{reason}", EN: "return: {reason}"},
		web.SystemReason{Text: `盘点 (?P<count>\S+) \(reconciliation (?P<action>.+)\)`,
			ZH: "盘点 {count}（对账 {action}）", EN: "stock count {count} (reconciliation {action})"},
	)
}
