package wechatpay

// The JSON bodies of the v3 API this project uses, field names as published.

// Notification is the envelope of a callback. Only Resource is encrypted.
type Notification struct {
	ID           string   `json:"id"`
	CreateTime   string   `json:"create_time"`
	EventType    string   `json:"event_type"` // TRANSACTION.SUCCESS, REFUND.SUCCESS, REFUND.ABNORMAL, REFUND.CLOSED
	ResourceType string   `json:"resource_type"`
	Summary      string   `json:"summary"`
	Resource     Resource `json:"resource"`
}

// Resource is an AEAD_AES_256_GCM ciphertext with what opens it.
type Resource struct {
	Algorithm      string `json:"algorithm"`
	Ciphertext     string `json:"ciphertext"`
	AssociatedData string `json:"associated_data"`
	OriginalType   string `json:"original_type"`
	Nonce          string `json:"nonce"`
}

// Transaction is a payment as the query answers and the
// TRANSACTION.SUCCESS resource carries it.
type Transaction struct {
	AppID          string `json:"appid"`
	MchID          string `json:"mchid"`
	OutTradeNo     string `json:"out_trade_no"`
	TransactionID  string `json:"transaction_id,omitempty"`
	TradeType      string `json:"trade_type,omitempty"`
	TradeState     string `json:"trade_state"` // SUCCESS, REFUND, NOTPAY, CLOSED, REVOKED, USERPAYING, PAYERROR
	TradeStateDesc string `json:"trade_state_desc"`
	BankType       string `json:"bank_type,omitempty"`
	Attach         string `json:"attach,omitempty"`
	SuccessTime    string `json:"success_time,omitempty"` // RFC 3339 with +08:00
	Payer          *Payer `json:"payer,omitempty"`
	Amount         *Money `json:"amount,omitempty"`
}

// Payer identifies the buyer.
type Payer struct {
	OpenID string `json:"openid"`
}

// Money is a transaction's amount in fen.
type Money struct {
	Total         int64  `json:"total"`
	PayerTotal    int64  `json:"payer_total,omitempty"`
	Currency      string `json:"currency"`
	PayerCurrency string `json:"payer_currency,omitempty"`
}

// RefundCreate is the body of POST /v3/refund/domestic/refunds.
type RefundCreate struct {
	TransactionID string       `json:"transaction_id,omitempty"`
	OutTradeNo    string       `json:"out_trade_no,omitempty"`
	OutRefundNo   string       `json:"out_refund_no"`
	Reason        string       `json:"reason,omitempty"`
	NotifyURL     string       `json:"notify_url,omitempty"`
	Amount        RefundAmount `json:"amount"`
}

// RefundAmount is a refund's amounts in fen.
type RefundAmount struct {
	Refund      int64  `json:"refund"`
	Total       int64  `json:"total"`
	Currency    string `json:"currency"`
	PayerTotal  int64  `json:"payer_total,omitempty"`
	PayerRefund int64  `json:"payer_refund,omitempty"`
}

// Refund is the answer of the refund and refund query calls.
type Refund struct {
	RefundID            string       `json:"refund_id"`
	OutRefundNo         string       `json:"out_refund_no"`
	TransactionID       string       `json:"transaction_id"`
	OutTradeNo          string       `json:"out_trade_no"`
	Channel             string       `json:"channel"`
	UserReceivedAccount string       `json:"user_received_account"`
	SuccessTime         string       `json:"success_time,omitempty"`
	CreateTime          string       `json:"create_time"`
	Status              string       `json:"status"` // SUCCESS, CLOSED, PROCESSING, ABNORMAL
	FundsAccount        string       `json:"funds_account,omitempty"`
	Amount              RefundAmount `json:"amount"`
}

// RefundNotice is the plaintext of a REFUND.* notification resource.
type RefundNotice struct {
	MchID               string `json:"mchid"`
	OutTradeNo          string `json:"out_trade_no"`
	TransactionID       string `json:"transaction_id"`
	OutRefundNo         string `json:"out_refund_no"`
	RefundID            string `json:"refund_id"`
	RefundStatus        string `json:"refund_status"`
	SuccessTime         string `json:"success_time,omitempty"`
	UserReceivedAccount string `json:"user_received_account"`
	Amount              struct {
		Total       int64 `json:"total"`
		Refund      int64 `json:"refund"`
		PayerTotal  int64 `json:"payer_total"`
		PayerRefund int64 `json:"payer_refund"`
	} `json:"amount"`
}

// Close is the body of POST /v3/pay/transactions/out-trade-no/{no}/close.
type Close struct {
	MchID string `json:"mchid"`
}

// BillURL answers GET /v3/bill/tradebill.
type BillURL struct {
	HashType    string `json:"hash_type"` // SHA1
	HashValue   string `json:"hash_value"`
	DownloadURL string `json:"download_url"`
}

// Certificates answers GET /v3/certificates; each certificate's PEM is
// encrypted with the APIv3 key.
type Certificates struct {
	Data []Certificate `json:"data"`
}

// Certificate is one platform certificate entry.
type Certificate struct {
	SerialNo           string   `json:"serial_no"`
	EffectiveTime      string   `json:"effective_time"`
	ExpireTime         string   `json:"expire_time"`
	EncryptCertificate Resource `json:"encrypt_certificate"`
}

// Error is the body of a 4xx/5xx answer and of a merchant's failure reply.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes the client classifies.
const (
	CodeOrderNotExist     = "ORDER_NOT_EXIST"
	CodeResourceNotExists = "RESOURCE_NOT_EXISTS"
	CodeSystemError       = "SYSTEM_ERROR"
	CodeSignError         = "SIGN_ERROR"
	CodeParamError        = "PARAM_ERROR"
	CodeOrderClosed       = "ORDER_CLOSED"
	CodeOrderPaid         = "ORDERPAID"
	CodeNotEnough         = "NOT_ENOUGH"
	CodeInvalidRequest    = "INVALID_REQUEST"
)
