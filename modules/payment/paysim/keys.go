package paysim

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/keelwork/keel/modules/payment/channel/wechatpay"
)

// keyBits is the size the channels require (WECHATPAY2-SHA256-RSA2048, RSA2).
const keyBits = 2048

// Generating a 2048-bit key costs up to a second on a loaded machine, and a
// test binary starts many simulators: the first keys of the process are
// generated once and shared. Each simulator still gets its own certificate
// and serial; RotateKey and NewKey always generate fresh keys.
var (
	baseKeysOnce sync.Once
	baseKeys     [4]*rsa.PrivateKey
	baseKeysErr  error
)

func sharedKeys() ([4]*rsa.PrivateKey, error) {
	baseKeysOnce.Do(func() {
		var wg sync.WaitGroup
		errs := make([]error, len(baseKeys))
		for i := range baseKeys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				baseKeys[i], errs[i] = rsa.GenerateKey(rand.Reader, keyBits)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				baseKeysErr = err
			}
		}
	})
	return baseKeys, baseKeysErr
}

// NewKey generates a fresh RSA key (for a test's "wrong key").
func NewKey() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, keyBits) }

// platformCert is one WeChat platform certificate.
type platformCert struct {
	key    *rsa.PrivateKey
	serial string
	pem    []byte
	from   time.Time
	until  time.Time
}

func newPlatformCert(key *rsa.PrivateKey, now time.Time) (*platformCert, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 159))
	if err != nil {
		return nil, err
	}
	tpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "Tenpay.com Root CA (simulated)", Organization: []string{"Tenpay.com"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(5 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("paysim: platform certificate: %w", err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &platformCert{key: key, serial: wechatpay.SerialHex(c), from: tpl.NotBefore, until: tpl.NotAfter,
		pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

func privatePEM(k *rsa.PrivateKey) []byte {
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func publicPEM(k *rsa.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return string(b)
}
