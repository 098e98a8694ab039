// Package web holds the one set of HTTP helpers the admin API and every
// module's routes and pages use, so that a rule about input or output is
// written once: problems with stable codes from one catalogue a module
// extends, strict JSON bodies, path ids, the paging rule and its cursors,
// the list envelope, the text rules for reasons, names and patterns, the
// operator's words for the engine's outcomes, and the display time zone.
//
// Bad input is refused before anything is written: a handler validates
// every field with these helpers first, then acts.
//
// What a module's console pages share besides (their templates, the data
// envelope, the redirect after a form, the navigation) is in package
// console below this one, which can speak in package module's types.
package web
