package module

import "net/http"

// Ingress is implemented by a module that receives calls from a
// counterpart that holds no bearer token and cannot be given one: a
// payment channel's notifications, a carrier's pushes. The server mounts
// each endpoint at its absolute path outside the API's authentication, so
// the handler must authenticate the caller itself (a signature over the
// raw body) and answer in the counterpart's protocol. Module routes
// (Routes) stay behind tokens and roles; only what a module lists here is
// public.
type Ingress interface {
	Ingress() []Endpoint
}

// Endpoint is one public path. Pattern is in ServeMux form with a method
// ("POST /payment/notify/{channel}"), outside /api/ and unique in the
// server.
type Endpoint struct {
	Pattern string
	Handler http.Handler
}
