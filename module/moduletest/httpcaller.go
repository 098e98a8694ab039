package moduletest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
)

// HTTPCaller is a modcli.Caller that sends a module's verbs to its routes
// over HTTP (an httptest server serving m.Routes() the way the server does),
// so a CLI test goes through the same requests and problem answers a user's
// `keel <module> …` would. It counts what it sends: a verb given bad input
// must be refused before any request leaves.
type HTTPCaller struct {
	// Base is the server's URL, without a trailing slash.
	Base string
	sent atomic.Int64
}

// Sent is how many requests were sent so far.
func (c *HTTPCaller) Sent() int64 { return c.sent.Load() }

// ProblemError is a problem+json answer: its stable code, title and
// detail, as a CLI verb sees it (modcli maps ProblemCode to its sentence).
// It reads the way the keel CLI's own problem error does, "detail (code)",
// so a module's CLI test checks the words its users will see.
type ProblemError struct{ Code, Title, Detail string }

func (p *ProblemError) Error() string {
	if p.Detail == "" {
		return p.Title + " (" + p.Code + ")"
	}
	return p.Detail + " (" + p.Code + ")"
}

func (p *ProblemError) ProblemCode() string { return p.Code }

// Stream sends one request without a body and returns the answer's body
// to read as it arrives (modcli.Streamer); a 4xx or 5xx answer is a
// *ProblemError.
func (c *HTTPCaller) Stream(ctx context.Context, method, path string) (io.ReadCloser, int64, error) {
	c.sent.Add(1)
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		var p ProblemError
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&p)
		return nil, 0, &p
	}
	return resp.Body, resp.ContentLength, nil
}

// Call sends one request: in (when not nil) as the JSON body, out (when not
// nil) decoded from a 2xx answer; a 4xx or 5xx answer is a *ProblemError.
func (c *HTTPCaller) Call(ctx context.Context, method, path string, in, out any) ([]byte, error) {
	c.sent.Add(1)
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		var p ProblemError
		_ = json.Unmarshal(raw, &p)
		return raw, &p
	}
	if out != nil {
		return raw, json.Unmarshal(raw, out)
	}
	return raw, nil
}
