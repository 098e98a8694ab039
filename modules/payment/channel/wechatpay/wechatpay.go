// Package wechatpay is the wire protocol of WeChat Pay API v3 as its
// published specification defines it: the signature message layouts, the
// Authorization header, SHA256-RSA (PKCS#1 v1.5) signatures,
// AEAD_AES_256_GCM resources, the JSON bodies and the trade bill format.
//
// It is written with the Go standard library by hand because the official
// SDK (github.com/wechatpay-apiv3/wechatpay-go) cannot be fetched from the
// module proxy this project builds with. It holds no state and does no I/O,
// so both Keel's client (package channel) and the channel simulator
// (package paysim) speak exactly the same format.
package wechatpay

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header names of a signed response or notification.
const (
	HeaderTimestamp = "Wechatpay-Timestamp"
	HeaderNonce     = "Wechatpay-Nonce"
	HeaderSignature = "Wechatpay-Signature"
	HeaderSerial    = "Wechatpay-Serial"
	HeaderRequestID = "Request-ID"
	// AuthScheme is the scheme of the merchant's Authorization header.
	AuthScheme = "WECHATPAY2-SHA256-RSA2048"
	// AlgorithmAEAD is the only resource encryption the v3 API defines.
	AlgorithmAEAD = "AEAD_AES_256_GCM"
	// MaxSkew is how far a signed timestamp may be from the receiver's clock.
	MaxSkew = 5 * time.Minute
)

// RetrySchedule is the published interval between notification attempts
// until the merchant acknowledges (15 more attempts after the first, about 24h).
var RetrySchedule = []time.Duration{
	15 * time.Second, 15 * time.Second, 30 * time.Second, 3 * time.Minute,
	10 * time.Minute, 20 * time.Minute, 30 * time.Minute, 30 * time.Minute,
	30 * time.Minute, 60 * time.Minute, 3 * time.Hour, 3 * time.Hour,
	3 * time.Hour, 6 * time.Hour, 6 * time.Hour,
}

// ChinaTime is the channel's zone (UTC+8, no daylight saving): bill days
// and success_time are in it. A fixed zone needs no tzdata on the host.
var ChinaTime = time.FixedZone("CST", 8*3600)

// NotifyMessage is what a platform signature covers, for both responses and
// notifications: timestamp, nonce and the exact body, each ended by '\n'.
func NotifyMessage(timestamp, nonce string, body []byte) []byte {
	b := make([]byte, 0, len(timestamp)+len(nonce)+len(body)+3)
	b = append(b, timestamp...)
	b = append(b, '\n')
	b = append(b, nonce...)
	b = append(b, '\n')
	b = append(b, body...)
	return append(b, '\n')
}

// RequestMessage is what the merchant's request signature covers: method,
// the URL's path and query, timestamp, nonce and body, each ended by '\n'.
func RequestMessage(method, pathAndQuery, timestamp, nonce string, body []byte) []byte {
	s := method + "\n" + pathAndQuery + "\n" + timestamp + "\n" + nonce + "\n"
	return append(append([]byte(s), body...), '\n')
}

// Sign signs msg with SHA256-RSA (PKCS#1 v1.5) and returns it base64-encoded.
func Sign(key *rsa.PrivateKey, msg []byte) (string, error) {
	sum := sha256.Sum256(msg)
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("wechatpay: signing: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// ErrBadSignature is returned by Verify when the signature does not match.
var ErrBadSignature = errors.New("wechatpay: signature does not verify")

// Verify checks a base64 SHA256-RSA (PKCS#1 v1.5) signature over msg.
func Verify(pub *rsa.PublicKey, msg []byte, signatureB64 string) error {
	sig, err := base64.StdEncoding.DecodeString(signatureB64)
	if err != nil {
		return fmt.Errorf("%w: signature is not base64", ErrBadSignature)
	}
	sum := sha256.Sum256(msg)
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		return ErrBadSignature
	}
	return nil
}

// CheckTimestamp parses a signed Unix-seconds timestamp and reports whether
// it lies within MaxSkew of now.
func CheckTimestamp(ts string, now time.Time) (time.Time, bool) {
	if len(ts) == 0 || len(ts) > 12 {
		return time.Time{}, false
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	t := time.Unix(sec, 0)
	d := now.Sub(t)
	return t, d <= MaxSkew && d >= -MaxSkew
}

// Auth is the content of a merchant's Authorization header.
type Auth struct {
	MchID, NonceStr, Signature, Timestamp, SerialNo string
}

// String renders the header value in the documented order.
func (a Auth) String() string {
	return fmt.Sprintf(`%s mchid="%s",nonce_str="%s",signature="%s",timestamp="%s",serial_no="%s"`,
		AuthScheme, a.MchID, a.NonceStr, a.Signature, a.Timestamp, a.SerialNo)
}

// ParseAuth parses an Authorization header value written by Auth.String
// (fields in any order, quoted values).
func ParseAuth(v string) (Auth, error) {
	var a Auth
	rest, ok := strings.CutPrefix(v, AuthScheme+" ")
	if !ok {
		return a, errors.New("wechatpay: authorization scheme is not " + AuthScheme)
	}
	for _, part := range strings.Split(rest, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
			return a, fmt.Errorf("wechatpay: authorization field %q is not key=\"value\"", part)
		}
		val = val[1 : len(val)-1]
		switch k {
		case "mchid":
			a.MchID = val
		case "nonce_str":
			a.NonceStr = val
		case "signature":
			a.Signature = val
		case "timestamp":
			a.Timestamp = val
		case "serial_no":
			a.SerialNo = val
		}
	}
	if a.MchID == "" || a.NonceStr == "" || a.Signature == "" || a.Timestamp == "" || a.SerialNo == "" {
		return a, errors.New("wechatpay: authorization lacks a field")
	}
	return a, nil
}

// Nonce returns a random 32-character hex string for nonce_str / Wechatpay-Nonce.
func Nonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

// ErrDecrypt is returned when a resource does not decrypt (wrong key,
// tampered ciphertext, nonce or associated data).
var ErrDecrypt = errors.New("wechatpay: resource does not decrypt")

func aead(apiV3Key string) (cipher.AEAD, error) {
	if len(apiV3Key) != 32 {
		return nil, fmt.Errorf("wechatpay: APIv3 key must be 32 bytes, got %d", len(apiV3Key))
	}
	block, err := aes.NewCipher([]byte(apiV3Key))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block) // 12-byte nonce, 16-byte tag, as the spec uses
}

// Decrypt opens an AEAD_AES_256_GCM resource: base64 ciphertext (with the
// tag appended), the 12-character nonce and the associated data.
func Decrypt(apiV3Key, nonce, associatedData, ciphertextB64 string) ([]byte, error) {
	g, err := aead(apiV3Key)
	if err != nil {
		return nil, err
	}
	if len(nonce) != g.NonceSize() {
		return nil, fmt.Errorf("%w: nonce is %d bytes", ErrDecrypt, len(nonce))
	}
	ct, err := base64.StdEncoding.DecodeString(ciphertextB64)
	if err != nil {
		return nil, fmt.Errorf("%w: ciphertext is not base64", ErrDecrypt)
	}
	pt, err := g.Open(nil, []byte(nonce), ct, []byte(associatedData))
	if err != nil {
		return nil, ErrDecrypt
	}
	return pt, nil
}

// Encrypt seals plaintext as the channel does (the simulator uses it).
func Encrypt(apiV3Key, nonce, associatedData string, plaintext []byte) (string, error) {
	g, err := aead(apiV3Key)
	if err != nil {
		return "", err
	}
	if len(nonce) != g.NonceSize() {
		return "", fmt.Errorf("wechatpay: nonce must be %d bytes", g.NonceSize())
	}
	return base64.StdEncoding.EncodeToString(g.Seal(nil, []byte(nonce), plaintext, []byte(associatedData))), nil
}

// ParsePrivateKey reads an RSA private key in PKCS#8 or PKCS#1 PEM.
func ParsePrivateKey(pemBytes []byte) (*rsa.PrivateKey, error) {
	blk, _ := pem.Decode(pemBytes)
	if blk == nil {
		return nil, errors.New("wechatpay: private key is not PEM")
	}
	if k, err := x509.ParsePKCS8PrivateKey(blk.Bytes); err == nil {
		if rk, ok := k.(*rsa.PrivateKey); ok {
			return rk, nil
		}
		return nil, errors.New("wechatpay: private key is not RSA")
	}
	k, err := x509.ParsePKCS1PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("wechatpay: parsing private key: %w", err)
	}
	return k, nil
}

// ParseCertificate reads a platform certificate PEM and returns its RSA key
// and its serial in the upper-case hex form the Wechatpay-Serial header uses.
func ParseCertificate(pemBytes []byte) (*rsa.PublicKey, string, *x509.Certificate, error) {
	blk, _ := pem.Decode(pemBytes)
	if blk == nil {
		return nil, "", nil, errors.New("wechatpay: certificate is not PEM")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, "", nil, fmt.Errorf("wechatpay: parsing certificate: %w", err)
	}
	pub, ok := c.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, "", nil, errors.New("wechatpay: certificate key is not RSA")
	}
	return pub, SerialHex(c), c, nil
}

// SerialHex is a certificate's serial as WeChat prints it (upper-case hex).
func SerialHex(c *x509.Certificate) string {
	return strings.ToUpper(c.SerialNumber.Text(16))
}
