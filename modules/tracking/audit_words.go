package tracking

import "github.com/keelwork/keel/module/web"

// The words of the audit actions and system actors this module writes
// (the console's audit log shows them; a test checks every action the
// source writes has words).
func init() {
	web.RegisterActions(map[string][2]string{
		"tracking.mapping.create":   {"新建承运商状态映射", "Create a carrier status mapping"},
		"tracking.mapping.activate": {"启用承运商状态映射", "Activate a carrier status mapping"},
	})
	web.RegisterSystemActors(map[string][2]string{
		"system:tracking": {"系统（物流跟踪）", "system (tracking)"},
	})
}
